"""TUI benchmark on a synthetic 10M-event trace (bench/gen_synthetic.py): first-open index
build, open time with the index built, step latency, RSS. Targets (issue 17): first open
of 10M events < 15 s and < 1.5 GB, open with the index < 1 s, step < 50 ms; memory while
stepping < 500 MB (DESIGN.md).

Each phase runs in a fresh process so its time and peak RSS are its own:

    python bench/bench_tui.py [--events 10000000] [--trace /tmp/s10m.kvtrace] [--keep]

Steps are measured through the real Textual app (headless pilot, 80x24), opened as on a
first open (the side panels' objects removed from the index, so they build in the
background meanwhile): the time from
a key press until the app has processed it and repainted, for j (within a cached page),
random jumps (each a cold page read), n/p in each follow mode (request, slot, transfer) and the
filter bar; the side panels refresh in a worker after the cursor settles and their
time is reported apart.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_mb() -> float:
    """Peak resident set of this process, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_parts() -> dict:
    """Current resident memory split: anonymous (the process's own) vs file-backed
    (memory-mapped trace files: page cache the kernel can drop), MB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024
    return out


def phase_build(trace: str) -> dict:
    """The first open as `kvtrace tui` does it: the Parquet index, then the timeline file
    (TimelineSource, the side panels' objects building in the background), then — apart —
    how long until those are ready."""
    from kvtrace.analysis.session import TraceSession
    from kvtrace.model import order
    from kvtrace.tui.source import TimelineSource

    t = time.perf_counter()
    s = TraceSession(trace, threads=2)
    t_index = time.perf_counter() - t
    t = time.perf_counter()
    src = TimelineSource(s, background=True)
    src.row(0)
    t_tl = time.perf_counter() - t
    out = {"analysis_index_s": t_index, "tui_index_s": t_tl, "rss_mb": rss_mb(), **order.TIMES}
    if hasattr(src, "wait_follow"):    # n/p's posting lists, built in their own thread (kvtrace/model/follow_index.py)
        ok = src.wait_follow(600)
        out.update(follow_ready_s=time.perf_counter() - t if ok else None, rss_follow_mb=rss_mb())
    if os.environ.get("BENCH_TUI_PANELS", "1") == "1":
        src.wait_ready()
        out.update(panels_ready_s=time.perf_counter() - t, rss_ready_mb=rss_mb())
    src.close()
    return out


def phase_open(trace: str) -> dict:
    t = time.perf_counter()
    from kvtrace.analysis.session import TraceSession
    from kvtrace.tui.source import TimelineSource

    src = TimelineSource(TraceSession(trace, threads=2), background=True)   # as `kvtrace tui` opens it
    src.row(0)
    out = {"open_s": time.perf_counter() - t, "events": src.total, "rss_mb": rss_mb(), **rss_parts()}
    src.close()         # interrupts the panels' background build (timed in the build phase)
    return out


def phase_steps(trace: str, n_steps: int) -> dict:
    import asyncio
    import random

    from kvtrace.analysis.session import TraceSession
    from kvtrace.tui import app as app_mod
    from kvtrace.tui.filters import Filter
    from kvtrace.tui.source import TimelineSource

    # the side panels' objects as on the viewer's first open: not yet derived (the build
    # phase saved them beside the index, kvtrace/model/persist.py), so the steps below
    # run while the model derives them in the background
    shutil.rmtree(os.path.join(trace, "_index", "derived"), ignore_errors=True)
    t0 = time.perf_counter()
    src = TimelineSource(TraceSession(trace, threads=2), background=True)   # as `kvtrace tui` opens it
    app_mod.PANEL_DELAY = 3600.0      # panels are timed on their own below
    app = app_mod.KvtraceApp(src, run_findings=False)
    out: dict = {}

    def handled(action) -> float:
        """ms for the key's handler plus drawing every timeline line it changed."""
        tl = app.timeline
        t = time.perf_counter()
        action()
        for y in range(tl.size.height):
            tl.render_line(y)
        return (time.perf_counter() - t) * 1000

    def follow_all(when: str) -> None:
        """n then p, 10 each, in each follow mode from an event that has its key (the
        middle of the trace, then further on for the next mode)"""
        from kvtrace.tui.follow import Follow
        tl = app.timeline
        tl.move_to(src.count // 2)
        for mode, has in ((Follow.REQUEST, "request"), (Follow.SLOT, "slots"), (Follow.XFER, "xfer")):
            while not tl.row[has]:
                tl.action_step(1)
            app.follow = mode
            out[f"n_{mode.value}_{when}_ms"] = [handled(lambda: app.action_follow(1)) for _ in range(10)]
            out[f"p_{mode.value}_{when}_ms"] = [handled(lambda: app.action_follow(-1)) for _ in range(10)]
            tl.move_to(tl.cursor + 5000)
        app.follow = Follow.REQUEST

    async def pressed(pilot, key, cpu: list) -> float:
        t, c = time.perf_counter(), time.process_time()
        await pilot.press(key)
        cpu.append((time.process_time() - c) * 1000)
        return (time.perf_counter() - t) * 1000

    async def go():
        async with app.run_test(size=(80, 24)) as pilot:
            out["app_ready_s"] = time.perf_counter() - t0
            tl, rnd = app.timeline, random.Random(7)
            tl.move_to(src.count // 3)
            await pilot.pause()
            out["j_ms"] = [handled(lambda: tl.action_step(1)) for _ in range(n_steps)]
            out["k_ms"] = [handled(lambda: tl.action_step(-1)) for _ in range(n_steps // 4)]
            out["jump_ms"] = [handled(lambda: tl.move_to(rnd.randrange(src.count))) for _ in range(n_steps // 4)]
            out["follow_start_s"] = time.perf_counter() - t0
            follow_all("building")
            out["panels_ready_after_building_rows"] = src.ready
            # the pilot's own round trip (message queue, idle wait, repaint) with and without work
            out["press_j_cpu_ms"], out["press_unbound_cpu_ms"] = [], []
            out["press_j_ms"] = [await pressed(pilot, "j", out["press_j_cpu_ms"]) for _ in range(40)]
            out["press_unbound_ms"] = [await pressed(pilot, "z", out["press_unbound_cpu_ms"]) for _ in range(40)]
            (post,) = src.con.execute("SELECT min(ord) FROM tl WHERE kind = 'xfer_post' AND ord >= ?",
                                      [tl.row["ord"]]).fetchone()
            row = src.row(src.position_of(post))
            t = time.perf_counter()
            src.wait_ready()   # the steps above ran while the panels' objects were built in the background
            out["ready_wait_s"] = time.perf_counter() - t
            follow_all("built")
            t = time.perf_counter()
            view = app.facts.transfer(row["shard"], row["xfer"], row["ord"])
            out["inspector_ms"] = (time.perf_counter() - t) * 1000
            out["descs_in_view"] = view.ndescs
            t = time.perf_counter()
            app.facts.slot_map("decode", "kv", row["ord"], 2048)
            out["slotmap_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            app.set_filter(Filter(request=row["request"]))
            out["filter_request_ms"] = (time.perf_counter() - t) * 1000
            out["filter_rows"] = src.count
            out["filtered_j_ms"] = [handled(lambda: tl.action_step(1)) for _ in range(max(1, src.count - 1))]
            out["rss_mb"] = rss_mb()
            out.update(rss_parts())
    asyncio.run(go())
    src.close()
    return out


def run_phase(name: str, trace: str, steps: int) -> dict:
    r = subprocess.run([sys.executable, __file__, "--phase", name, "--trace", trace, "--steps", str(steps)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser(description="kvtrace tui benchmark")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--trace", help="use/keep this trace path (generated if missing)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--keep", action="store_true", help="keep the generated trace")
    ap.add_argument("--opens-only", action="store_true",
                    help="first open and open with the index only: no wait for the side panels' objects, no steps")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.phase:
        print(json.dumps({"build": phase_build, "open": phase_open}[a.phase](a.trace) if a.phase != "steps"
                         else phase_steps(a.trace, a.steps)))
        return
    tmp = None
    trace = a.trace
    if trace is None:
        tmp = tempfile.mkdtemp(prefix="kvtrace-bench-tui-")
        trace = os.path.join(tmp, "synthetic.kvtrace")
    if not os.path.exists(trace):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_synthetic.py"), trace, "--events", str(a.events)], check=True)
    shutil.rmtree(os.path.join(trace, "_index"), ignore_errors=True)
    print(f"kvtrace tui benchmark — {os.cpu_count()} CPUs, DuckDB threads=2, terminal 80x24; load {os.getloadavg()[0]:.1f}")
    if a.opens_only:
        os.environ["BENCH_TUI_PANELS"] = "0"   # inherited by the phase processes
    b = run_phase("build", trace, a.steps)
    first = b['analysis_index_s'] + b['tui_index_s']
    print(f"first open, index build: analysis _index {b['analysis_index_s']:.1f} s + timeline order "
          f"{b['tui_index_s']:.1f} s = {first:.1f} s (target < 15 s: {'OK' if first < 15 else 'MISSED'}); "
          f"peak RSS {b['rss_mb']:.0f} MB (target < 1500 MB: {'OK' if b['rss_mb'] < 1500 else 'MISSED'}); once per trace")
    if "hb_keys_s" in b:
        print(f"  timeline order parts (kvtrace/model/order.py): happens-before keys {b['hb_keys_s']:.1f} s, "
              f"merge + Parquet write {b['sort_write_s']:.1f} s; the rest is the model's sync_pairs and reading seq/t_ns")
    if b.get("follow_ready_s") is not None:
        print(f"  n/p's posting lists (kvtrace/model/follow_index.py), built in their own thread: ready "
              f"{b['follow_ready_s']:.1f} s after the index, peak RSS then {b['rss_follow_mb']:.0f} MB")
    if "panels_ready_s" in b:
        print(f"  then the side panels' objects, built in the background: ready {b['panels_ready_s']:.1f} s after the index, "
              f"peak RSS {b['rss_ready_mb']:.0f} MB")
    opens = [run_phase("open", trace, a.steps) for _ in range(3)]
    o = min(opens, key=lambda r: r["open_s"])
    print(f"events: {o['events']:,}")
    print(f"open with index built: best {o['open_s']:.2f} s, worst {max(r['open_s'] for r in opens):.2f} s of 3 "
          f"(target < 1 s: {'OK' if max(r['open_s'] for r in opens) < 1 else 'MISSED'}); peak RSS {o['rss_mb']:.0f} MB "
          f"(now: {o['RssAnon']:.0f} MB anonymous + {o['RssFile']:.0f} MB file-backed mmap)")
    if a.opens_only:
        if tmp and not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    s = run_phase("steps", trace, a.steps)
    print(f"app ready (open + first paint, pilot): {s['app_ready_s']:.2f} s; the steps below ran while the side "
          f"panels' objects were built in the background (waited {s['ready_wait_s']:.1f} s more for them after the steps; "
          f"{'already built' if s.get('panels_ready_after_building_rows') else 'still building'} when the n/p 'building' rows ended)")
    print("step = the key's handler + drawing the timeline's lines (page reads included); the pilot rows "
          "below add Textual's message/idle round trip, which an unbound key costs too")
    for key, label in (("j_ms", "step j"), ("k_ms", "step k"), ("jump_ms", "jump (cold page)"),
                       *[(f"{d}_{m}_{w}_ms", f"{d}: {m}, {w}")
                         for w in ("building", "built") for m in ("request", "slot", "transfer") for d in "np"],
                       ("filtered_j_ms", "step j, filtered"),
                       ("press_j_ms", "pilot press j, wall"), ("press_j_cpu_ms", "pilot press j, CPU"),
                       ("press_unbound_ms", "pilot press unbound, wall"), ("press_unbound_cpu_ms", "pilot press unbound, CPU")):
        xs = s[key]
        print(f"{label:<26} median {statistics.median(xs):6.1f} ms  p95 {pct(xs, .95):6.1f} ms  max {max(xs):6.1f} ms"
              f"  (n={len(xs)}; target < 50 ms: {'OK' if pct(xs, .95) < 50 else 'MISSED'})")
    print(f"panel refresh (worker, after the cursor settles): inspector {s['inspector_ms']:.0f} ms "
          f"({s['descs_in_view']} descriptors), slot map decode/kv 2048 slots {s['slotmap_ms']:.0f} ms")
    print(f"filter request=… ({s['filter_rows']:,} rows): {s['filter_request_ms']:.0f} ms")
    print(f"peak RSS while stepping: {s['rss_mb']:.0f} MB (target < 500 MB: {'OK' if s['rss_mb'] < 500 else 'MISSED'}); "
          f"at the end {s['RssAnon']:.0f} MB anonymous + {s['RssFile']:.0f} MB file-backed (mmap of the trace's streams and index)")
    if tmp and not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
