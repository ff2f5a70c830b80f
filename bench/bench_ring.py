"""Flight recorder cost: ring vs normal recording vs none, memory over a long run, and
how fast `watch` reports a hazard. All arms in one run, side by side.

1. Throughput: the reference engine (in-process, real NIXL over UCX) on one workload and
   seed, arms interleaved round-robin: ``off`` (plain nixl_agent), ``file`` (Recorder to
   disk) and ``ring`` (RingRecorder, --ring 30s). Checksums are off in every arm so the
   arms differ only by where the events go. Transfer throughput = KV pages delivered and
   read per second of wall time.
2. Memory: each arm of a long run in a fresh process, RSS sampled at every engine step
   (growth over the RSS before the engine started, at 10/25/50/75/100% of the run), peak
   RSS (ru_maxrss), the most the ring's budget had committed (reserves + batches + working
   bytes: what SIZE bounds, for the process's two rings together) and the bytes its packed
   batches take, for several ring sizes and run lengths beside no recording and file
   recording; then one dump per ring run. Per ring: the most RSS growth over file recording
   at any sampled point, split into anonymous memory (heap, pools) and mapped library code,
   the peak and the final RSS over file recording, each against SIZE (the process's bound),
   said "within" or "OVER". A SIZE the ring refuses (below its minimum) is reported so.
3. watch: a recording with a late injected bug is followed by ``Watcher`` (real clock);
   latency = when the finding was printed - when a poll first saw the files holding its
   facts (itself at most one poll interval, 0.2 s, after their flush).

    .venv/bin/python bench/bench_ring.py [--reps 3] [--requests 400] [--long 1500,3000] [--ring-size 8MB,32MB]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _workload(requests: int, after: int = 0):
    from kvtrace.tracer.engine.workload import load
    wl = load("small", requests=requests)
    if after:
        wl.engine["inject_after"] = after
    return wl


def throughput(reps: int, requests: int, tmp: str) -> None:
    from kvtrace.tracer import gil
    from kvtrace.tracer.engine.runner import run_inprocess
    wl = _workload(requests)
    # ring@0.2ms: the flush thread at a 0.2 ms GIL switch interval (tracer/gil.py, opt-in)
    arms = {"off": None, "file": "", "ring": "30s", "ring@0.2ms": "30s"}
    times: dict[str, list[float]] = {a: [] for a in arms}
    cpu: dict[str, list[float]] = {a: [] for a in arms}
    for arm, ring in arms.items():   # warm-up: every arm once (imports, first-use costs: the steady state)
        out = None if ring is None else os.path.join(tmp, f"warm-{arm}.kvtrace")
        run_inprocess(wl, [], out, checksums=False, ring=ring or None)
        if out:
            shutil.rmtree(out, ignore_errors=True)
    pages = 0
    switch = gil.BACKGROUND_SWITCH_S
    for rep in range(reps):
        for arm, ring in arms.items():
            out = None if ring is None else os.path.join(tmp, f"{arm}-{rep}.kvtrace")
            gil.BACKGROUND_SWITCH_S = 0.0002 if arm == "ring@0.2ms" else switch
            t0, c0 = time.perf_counter(), time.process_time()
            s = run_inprocess(wl, [], out, checksums=False, ring=ring or None)
            times[arm].append(time.perf_counter() - t0)
            cpu[arm].append(time.process_time() - c0)   # all threads of this process (the flush's too)
            gil.BACKGROUND_SWITCH_S = switch
            pages = s["pages_read"]
            if out and not (arm == "file" and rep == reps - 1):
                shutil.rmtree(out, ignore_errors=True)
    print(f"[throughput] workload small x{requests} requests, {pages} KV pages delivered+read per run, "
          f"checksums off, {reps} reps per arm interleaved")
    best = {a: min(v) for a, v in times.items()}
    med = {a: statistics.median(v) for a, v in times.items()}
    for a, v in times.items():
        print(f"  {a:10s} best {best[a]:6.2f} s ({pages / best[a]:8.1f} pages/s)  median {med[a]:6.2f} s  runs "
              + " ".join(f"{x:.2f}" for x in v))
    for a, v in cpu.items():
        print(f"  {a + ' cpu':14s} best {min(v):6.3f} s  median {statistics.median(v):6.3f} s  runs "
              + " ".join(f"{x:.3f}" for x in v))
    cbest = {a: min(v) for a, v in cpu.items()}
    cmed = {a: statistics.median(v) for a, v in cpu.items()}
    for a, b in (("ring", "file"), ("ring", "off"), ("file", "off"), ("ring@0.2ms", "off")):
        print(f"  overhead {a:10s} vs {b:4s}  best {best[a] / best[b] - 1:+7.1%}   median {med[a] / med[b] - 1:+7.1%}"
              f"   CPU best {cbest[a] / cbest[b] - 1:+7.1%}   median {cmed[a] / cmed[b] - 1:+7.1%}"
              + ("   (target <= 2%)" if (a, b) == ("ring", "off") else ""))
    print(f"  (after a warm-up run of every arm; load average {os.getloadavg()[0]:.1f} at the end)")
    ingest_cost(os.path.join(tmp, f"file-{reps - 1}.kvtrace"))


def ingest_cost(trace: str) -> None:
    """CPU per event of what differs between the modes, replaying a recorded trace's events
    in flush-sized batches: the Recorder's batch building (both modes pay it) vs the ring's
    bookkeeping and eviction (ring only); thread CPU time, so other load counts less."""
    from kvtrace.tracer.reader import open_trace
    from kvtrace.tracer.recorder import _events_batch
    from kvtrace.tracer.ring_store import RingStore
    t = open_trace(trace)
    conv = ring = 0.0
    n = 0
    for sh in t.shards:
        ev = sh.streams["events"].table
        batches = [b for b in ev.to_batches(max_chunksize=2000) if b.num_rows]
        rows = [[tuple(r.values()) for r in b.to_pylist()] for b in batches]
        c0 = time.thread_time()
        for r in rows:
            _events_batch(r)
        conv += time.thread_time() - c0
        store = RingStore(window_ns=int(0.5e9), slack_ns=int(1e9))
        c0 = time.thread_time()
        for b, r in zip(batches, rows):   # with the row tuples, as RingRecorder hands them over
            store.add("events", b, r)
            store.evict(b.column("t_ns")[-1].as_py())
        ring += time.thread_time() - c0
        n += ev.num_rows
    print(f"[ingest] {n} events of that trace, CPU per event: batch building {conv / n * 1e6:.2f} us "
          f"(both modes), ring bookkeeping + eviction {ring / n * 1e6:.2f} us (ring only)")


_CHILD = r"""
import json, os, resource, sys, time
os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
sys.path.insert(0, {root!r})
import pyarrow   # every arm loads the same libraries: the baseline differs only by the recording
from bench.bench_ring import _workload
from kvtrace.tracer.engine import runner
from kvtrace.tracer import ring as ringmod
arm, out, size, n = {arm!r}, {out!r}, {size!r}, {n}
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def rss_anon():   # anonymous pages: heap and pools (the rest is mapped files: library code)
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
def packed(st):   # the bytes the ring's packed batches take in memory
    return (sum(len(c.events.data) + sum(len(d.data) for d in c.descs) for c in list(st.chunks) if c.events is not None)
            + sum(len(p[0].data) for p in list(st.pinned) + list(st.pinned_descs)))
peak_store = [0]
peak_packed = [0]
peak_book = [0]
recs, samples = [], []
orig = runner._recorder
def spy(*a, **k):
    r = orig(*a, **k)
    recs.append(r)
    return r
runner._recorder = spy
triggered = [False]
def on_step(done, total):
    stores = [x.store for x in recs if getattr(x, "store", None)]
    if stores:   # what SIZE bounds: the budget's reserves + every ring's batches and working bytes
        peak_store[0] = max(peak_store[0], stores[0].budget.committed())
        peak_book[0] = max(peak_book[0], sum(x.book_bytes for x in stores))
    if stores and len(samples) % 10 == 0:
        peak_packed[0] = max(peak_packed[0], sum(packed(x) for x in stores))
    samples.append((done, rss(), rss_anon()))
    if arm == "ring" and done >= total - 20 and not triggered[0]:   # near the end: one dump of a full ring
        triggered[0] = True
        ringmod.trigger("bench")
start_rss, start_anon = rss(), rss_anon()
t0 = time.perf_counter()
if arm == "ring":
    from kvtrace.tracer.ring_budget import RingSizeError
    try:
        s = runner.run_inprocess(_workload(n), [], out, checksums=False, ring=size, on_step=on_step)
    except RingSizeError as e:
        print(json.dumps({{"refused": str(e)}}))
        raise SystemExit(0)
elif arm == "file":
    s = runner.run_inprocess(_workload(n), [], out, checksums=False, on_step=on_step)
else:
    s = runner.run_inprocess(_workload(n), [], None, checksums=False, on_step=on_step)
wall = time.perf_counter() - t0
dump = {{}}
if arm == "ring":
    from kvtrace.tracer.ring_dump import dump_path
    d = dump_path(out, 1)
    for sh in ("prefill", "decode"):
        info = json.load(open(os.path.join(d, sh, "shard.json")))
        dump[sh] = [info["ring"]["dumped_unix"] - info["ring"]["trigger"]["unix"], info["events"],
                    info["ring"]["window"]["pinned_events"], info["ring"]["window"]["evicted_events"],
                    info["ring"]["window"]["state_complete"]]
print(json.dumps({{"wall": wall, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "start_rss": start_rss, "start_anon": start_anon, "samples": samples,
                  "pyarrow_pool": pyarrow.total_allocated_bytes(), "peak_store": peak_store[0],
                  "peak_packed": peak_packed[0], "peak_book": peak_book[0], "requests": s["requests"],
                  "dump": dump}}))
"""

_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)


def _child(root: str, arm: str, size: str, n: int, tmp: str):
    sub = tempfile.mkdtemp(dir=tmp)    # its own folder: the ring's dumps land beside the trace
    out = None if arm == "off" else os.path.join(sub, "long.kvtrace")
    code = _CHILD.format(root=root, arm="ring" if arm.startswith("ring") else arm, out=out, size=size, n=n)
    return sub, subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)


def _at(samples: list, n: int, frac: float, col: int = 1) -> int:
    """Highest RSS (col 1; col 2: anonymous RSS) sampled up to ``frac`` of the run's
    requests (RSS as the run goes)."""
    upto = [s[col] for s in samples if s[0] <= frac * n] or [samples[0][col]]
    return max(upto)


def memory(longs: list[int], sizes: list[str], tmp: str, jobs: int = 1) -> None:
    """RSS over time per arm (no recording / file / ring of each size) for each run length.
    Growth is RSS minus the RSS sampled just before the engine started (libraries loaded).
    Arms run in fresh processes, ``jobs`` at a time, in the order n x (off, file, rings...),
    so every ring arm runs beside or just after the file arm it is compared with."""
    from kvtrace.tracer.ring import ring_budget_bytes
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    arms = [("off", ""), ("file", "")] + [(f"ring {z}", z) for z in sizes]
    todo = [(n, arm, z) for n in longs for arm, z in arms]
    res, running = {}, []
    while todo or running:
        while todo and len(running) < jobs:
            n, arm, z = todo.pop(0)
            running.append((n, arm, *_child(root, arm, z, n, tmp)))
        n, arm, out, proc = running.pop(0)
        so, se = proc.communicate(timeout=3000)
        if proc.returncode != 0:
            print(se[-2000:])
            raise SystemExit(1)
        res[(n, arm)] = json.loads(so.strip().splitlines()[-1])
        shutil.rmtree(out, ignore_errors=True)
    mib = 2 ** 20
    print(f"[memory] workload small, checksums off, reference engine in one process (prefill and decode: "
          f"two rings sharing one SIZE), each arm in a fresh process ({jobs} at a time); RSS growth = RSS - RSS "
          f"just before the engine started (pyarrow + kvtrace loaded in every arm), MiB, the highest sample up "
          f"to that share of the requests; committed = the most the ring budget charged (reserves + batches "
          f"+ working bytes), held = its packed batches' bytes, book = its bookkeeping")
    for n in longs:
        print(f"  run of {n} requests        " + "".join(f"{int(f * 100):>7d}%" for f in _FRACTIONS)
              + "   peak RSS   committed max (SIZE), held, book")
        for arm, z in arms:
            v = res[(n, arm)]
            if "refused" in v:
                print(f"    {arm:22s} refused: {v['refused']}")
                continue
            row = "".join(f"{(_at(v['samples'], n, f) - v['start_rss']) / mib:+8.1f}" for f in _FRACTIONS)
            extra = ""
            if z:
                extra = (f"   {v['peak_store'] / mib:6.2f} ({ring_budget_bytes(z) / mib:.0f}), "
                         f"{v['peak_packed'] / mib:.2f}, {v['peak_book'] / mib:.2f}")
            print(f"    {arm:22s} {row}   {v['maxrss_kb'] / 1024:7.1f}{extra}")
        f_ = res[(n, "file")]
        for arm, z in arms[2:]:
            v = res[(n, arm)]
            if "refused" in v:
                continue
            cap = ring_budget_bytes(z)
            over = max((_at(v["samples"], n, fr) - v["start_rss"]) - (_at(f_["samples"], n, fr) - f_["start_rss"])
                       for fr in _FRACTIONS)
            anon = max((_at(v["samples"], n, fr, 2) - v["start_anon"]) - (_at(f_["samples"], n, fr, 2) - f_["start_anon"])
                       for fr in _FRACTIONS)
            peak = v["maxrss_kb"] * 1024 - f_["maxrss_kb"] * 1024
            final = (v["samples"][-1][1] - v["start_rss"]) - (f_["samples"][-1][1] - f_["start_rss"])
            worst = max(over, peak, final)
            print(f"    {arm}: RSS over file recording: most at any sampled point {over / mib:+.1f} MiB "
                  f"(anonymous {anon / mib:+.1f}, mapped library code {(over - anon) / mib:+.1f}), peak "
                  f"{peak / mib:+.1f}, final {final / mib:+.1f}; vs SIZE {cap / mib:.0f} MiB: "
                  + ("within" if worst <= cap else "OVER") + f" ({worst / cap:.0%} of it at most)")
        for arm, z in arms[2:]:
            for sh, (delay, events, pinned, evicted, whole) in res[(n, arm)].get("dump", {}).items():
                print(f"    {arm} dump near the end, shard {sh:7s}: written {delay:5.2f} s after the trigger, "
                      f"{events} events ({pinned} kept from before the window, {evicted} evicted, "
                      f"state_complete {whole})")


def _rss_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _roles() -> dict[int, str]:
    """pid -> prefill/decode, for the SGLang driver's two processes running now."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if b"--role" in cmd and any(x.endswith(b"sglang_pd.py") for x in cmd):
            role = cmd[cmd.index(b"--role") + 1].decode()
            if role in ("prefill", "decode"):
                out[int(d)] = role
    return out


def real_memory(sizes: list[str], requests: int, tmp: str) -> None:
    """SGLang's real NIXL connector (tests/engines/sglang_pd.py: prefill and decode as two OS
    processes, one ring each) recorded to a file and into rings of each size, one run after
    the other in one invocation; each process's RSS sampled every 0.1 s: its peak, and its
    RSS at three quarters of its life (late in the run, before teardown frees memory), ring
    minus file per process, against SIZE."""
    from kvtrace.tracer.ring import ring_budget_bytes
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    venv = os.environ.get("KVTRACE_ENGINES_VENV") or os.path.join(root, ".venv-engines")
    py = os.path.join(venv, "bin", "python")
    prog = [py, os.path.join(root, "tests", "engines", "sglang_pd.py"), "--index-k", "tokens", "--requests",
            str(requests), "--wave", "8", "--max-pages", "8", "--slots", "128", "--kv-layers", "4",
            "--index-layers", "4", "--timeout", "600"]
    arms = [("file", None)] + [(f"ring {z}", z) for z in sizes]
    res = {}
    for arm, z in arms:
        out = os.path.join(tmp, arm.replace(" ", "-") + ".kvtrace")
        cmd = [py, "-m", "kvtrace", "record", "--hooks", "sglang", "--force", "-o", out,
               *(["--ring", z] if z else []), "--"] + prog
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
        samples: dict[str, list[int]] = {}
        t0 = time.time()
        while proc.poll() is None:
            for pid, role in _roles().items():
                r = _rss_of(pid)
                if r:
                    samples.setdefault(role, []).append(r)
            time.sleep(0.1)
        peak = {r: max(v) for r, v in samples.items()}
        last = {r: v[len(v) * 3 // 4] for r, v in samples.items()}
        so, se = proc.communicate()
        if proc.returncode != 0:
            print(f"  {arm}: exit {proc.returncode}: {se.strip().splitlines()[-1:] }")
            res[arm] = None
            continue
        events = [ln for ln in (so + se).splitlines() if "events" in ln][-1:]
        budget = {}    # each ring process's own account: the most its budget committed (shard.json)
        stage = os.path.join(out, "_ring")
        for sh in (os.listdir(stage) if z and os.path.isdir(stage) else []):
            try:
                with open(os.path.join(stage, sh, "shard.json")) as f:
                    budget[sh] = json.load(f).get("ring_memory") or {}
            except (OSError, ValueError):
                pass
        res[arm] = (peak, last, time.time() - t0, events, budget)
        shutil.rmtree(out, ignore_errors=True)
    mib = 2 ** 20
    print(f"[real memory] SGLang 0.5.21's NIXL connector (tests/engines/sglang_pd.py, {requests} requests, "
          f"prefill and decode as two processes, one ring each: SIZE per process), RSS sampled every 0.1 s, MiB")
    for arm, z in arms:
        v = res[arm]
        if v is None:
            continue
        peak, last, wall, events, budget = v
        print(f"    {arm:10s} " + "  ".join(f"{r}: peak {peak.get(r, 0) / mib:7.1f} at 3/4 {last.get(r, 0) / mib:7.1f}"
                                          for r in ("prefill", "decode")) + f"   wall {wall:5.1f} s  {events[0] if events else ''}")
        for sh, m in sorted(budget.items()):
            print(f"      {sh}: the ring budget committed at most {m.get('committed_max', 0) / mib:.2f} MiB of "
                  f"{m.get('size', 0) / mib:.0f} ({m.get('rings_in_process')} ring(s) in the process, "
                  f"{m.get('overflow_events', 0)} events dropped as over-large flushes)")
    f_ = res.get("file")
    for arm, z in arms[1:]:
        v = res[arm]
        if v is None or f_ is None:
            continue
        cap = ring_budget_bytes(z)
        for r in ("prefill", "decode"):
            dp, dl = v[0].get(r, 0) - f_[0].get(r, 0), v[1].get(r, 0) - f_[1].get(r, 0)
            print(f"    {arm} {r}: over file recording peak {dp / mib:+.1f} MiB, at 3/4 of the run {dl / mib:+.1f} MiB; "
                  f"vs SIZE {cap / mib:.0f} MiB: " + ("within" if max(dp, dl) <= cap else "OVER"))


def watch_latency(requests: int, after: int, tmp: str) -> None:
    from kvtrace.analysis.watch import Watcher
    out = os.path.join(tmp, "watched.kvtrace")
    toml = os.path.join(tmp, "watched.toml")
    with open(toml, "w") as f:
        f.write(f'name = "watched"\nrequests = {requests}\nconcurrency = 4\n')
    proc = subprocess.Popen([sys.executable, "-m", "kvtrace", "record", "--workload", toml, "--inject",
                             "early-src-free", "--inject-after", str(after), "--no-progress", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w = Watcher(out, time.time)
    lat, checks = [], []
    while True:
        done = proc.poll() is not None
        t0 = time.time()
        reports = w.poll()
        if w.checks_run and (not checks or checks[-1][0] != w.checks_run):
            checks.append((w.checks_run, time.time() - t0))
        for r in reports:   # landed_at: the poll that first saw the grown files (<= 0.2 s after the flush)
            lat.append((r.finding.check, r.seen_at - r.landed_at, "during" if not done else "at the end"))
        if done:
            if w.settle_s:       # the recording ended: what is found now is final
                w.settle_s = 0.0
                continue
            break
        time.sleep(0.2)
    print(f"[watch] recording small x{requests} requests, early-src-free after {after}; poll every 0.2 s; "
          f"checks ran {w.checks_run} times, median {statistics.median(c for _, c in checks):.2f} s each")
    for check, l, when in lat[:5]:
        print(f"  {check:24s} printed {l:5.2f} s after the poll that first saw its facts "
              f"({when} of the recording; polls are 0.2 s apart, settle 0.5 s)")
    if not lat:
        print("  no finding reported")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--long", default="1500,3000", help="run lengths (requests), comma-separated")
    ap.add_argument("--ring-size", default="8MB,32MB", help="ring sizes (SIZE per process), comma-separated")
    ap.add_argument("--jobs", type=int, default=1, help="memory arms run at once (each its own process)")
    ap.add_argument("--only", choices=("throughput", "memory", "watch", "real-memory"), default=None)
    ap.add_argument("--real-requests", type=int, default=2000,
                    help="real-memory: requests through SGLang's connector per run")
    args = ap.parse_args()
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    tmp = tempfile.mkdtemp(prefix="kvtrace-bench-ring-")
    try:
        if args.only in (None, "throughput"):
            throughput(args.reps, args.requests, tmp)
        if args.only in (None, "memory"):
            memory([int(x) for x in args.long.split(",")], args.ring_size.split(","), tmp, args.jobs)
        if args.only == "real-memory":   # needs .venv-engines (scripts/setup_engines.sh)
            real_memory(args.ring_size.split(","), args.real_requests, tmp)
        if args.only in (None, "watch"):
            watch_latency(args.requests * 2, args.requests, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
