"""Flight recorder cost: ring vs normal recording vs none, memory over a long run, and
how fast `watch` reports a hazard. All arms in one run, side by side.

1. Throughput: the reference engine (in-process, real NIXL over UCX) on one workload and
   seed, arms interleaved round-robin: ``off`` (plain nixl_agent), ``file`` (Recorder to
   disk) and ``ring`` (RingRecorder, --ring 30s). Checksums are off in every arm so the
   arms differ only by where the events go. Transfer throughput = KV pages delivered and
   read per second of wall time.
2. Memory: each arm of a long run in a fresh process, peak RSS (ru_maxrss) and the ring's
   largest store size sampled at every engine step, for --ring SIZE; then one dump.
3. watch: a recording with a late injected bug is followed by ``Watcher`` (real clock);
   latency = when the finding was printed - mtime of the newest stream it could have used.

    .venv/bin/python bench/bench_ring.py [--reps 3] [--requests 400] [--long 3000] [--ring-size 8MB]
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
    from kvtrace.tracer.engine.runner import run_inprocess
    wl = _workload(requests)
    arms = {"off": None, "file": "", "ring": "30s"}
    times: dict[str, list[float]] = {a: [] for a in arms}
    run_inprocess(wl, [], None, checksums=False)   # warm-up
    pages = 0
    for rep in range(reps):
        for arm, ring in arms.items():
            out = None if ring is None else os.path.join(tmp, f"{arm}-{rep}.kvtrace")
            t0 = time.perf_counter()
            s = run_inprocess(wl, [], out, checksums=False, ring=ring or None)
            times[arm].append(time.perf_counter() - t0)
            pages = s["pages_read"]
            if out and not (arm == "file" and rep == reps - 1):
                shutil.rmtree(out, ignore_errors=True)
    print(f"[throughput] workload small x{requests} requests, {pages} KV pages delivered+read per run, "
          f"checksums off, {reps} reps per arm interleaved")
    best = {a: min(v) for a, v in times.items()}
    med = {a: statistics.median(v) for a, v in times.items()}
    for a, v in times.items():
        print(f"  {a:5s} best {best[a]:6.2f} s ({pages / best[a]:8.1f} pages/s)  median {med[a]:6.2f} s  runs "
              + " ".join(f"{x:.2f}" for x in v))
    for a, b in (("ring", "file"), ("ring", "off"), ("file", "off")):
        print(f"  overhead {a} vs {b:4s}  best {best[a] / best[b] - 1:+7.1%}   median {med[a] / med[b] - 1:+7.1%}"
              + ("   (target <= 2%)" if (a, b) == ("ring", "file") else ""))
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
        for b in batches:
            store.add("events", b)
            store.evict(b.column("t_ns")[-1].as_py())
        ring += time.thread_time() - c0
        n += ev.num_rows
    print(f"[ingest] {n} events of that trace, CPU per event: batch building {conv / n * 1e6:.2f} us "
          f"(both modes), ring bookkeeping + eviction {ring / n * 1e6:.2f} us (ring only)")


_CHILD = r"""
import json, os, resource, sys, time
os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
sys.path.insert(0, {root!r})
from bench.bench_ring import _workload
from kvtrace.tracer.engine import runner
from kvtrace.tracer import ring as ringmod
arm, out, size, n = {arm!r}, {out!r}, {size!r}, {n}
peak_store = [0]
recs = []
orig = runner._recorder
def spy(*a, **k):
    r = orig(*a, **k)
    recs.append(r)
    return r
runner._recorder = spy
triggered = [False]
def on_step(done, total):
    peak_store[0] = max(peak_store[0], sum(x.store.nbytes for x in recs if getattr(x, "store", None)))
    if done >= total - 20 and not triggered[0]:   # near the end: one dump of a full ring
        triggered[0] = True
        ringmod.trigger("bench")
t0 = time.perf_counter()
if arm == "ring":
    s = runner.run_inprocess(_workload(n), [], out, checksums=False, ring=size, on_step=on_step)
else:
    s = runner.run_inprocess(_workload(n), [], out, checksums=False)
wall = time.perf_counter() - t0
dump = {{}}
if arm == "ring":
    from kvtrace.tracer.ring_dump import dump_path
    d = dump_path(out, 1)
    for sh in ("prefill", "decode"):
        info = json.load(open(os.path.join(d, sh, "shard.json")))
        dump[sh] = [info["ring"]["dumped_unix"] - info["ring"]["trigger"]["unix"], info["events"],
                    info["ring"]["window"]["pinned_events"], info["ring"]["window"]["evicted_events"]]
print(json.dumps({{"wall": wall, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "peak_store": peak_store[0], "requests": s["requests"], "dump": dump}}))
"""


def memory(long: int, size: str, tmp: str) -> None:
    from kvtrace.tracer.ring import parse_ring
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cap = parse_ring(size)[0]
    res = {}
    for arm in ("off", "file", "ring"):
        out = None if arm == "off" else os.path.join(tmp, f"long-{arm}.kvtrace")
        code = _CHILD.format(root=root, arm=arm, out=out, size=size, n=long)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3000)
        if r.returncode != 0:
            print(r.stderr[-2000:])
            raise SystemExit(1)
        res[arm] = json.loads(r.stdout.strip().splitlines()[-1])
        if out:
            res[arm]["disk"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
            shutil.rmtree(out, ignore_errors=True)
            for p in [p for p in os.listdir(tmp) if ".dump" in p]:
                shutil.rmtree(os.path.join(tmp, p), ignore_errors=True)
    print(f"[memory] workload small x{long} requests, each arm in a fresh process, --ring {size} "
          f"({cap / 2**20:.0f} MiB over both shards' stores: {cap * 2 / 2**20:.0f} MiB)")
    for arm, v in res.items():
        extra = f"  trace on disk {v['disk'] / 2**20:7.1f} MiB" if "disk" in v else ""
        print(f"  {arm:5s} wall {v['wall']:6.1f} s  peak RSS {v['maxrss_kb'] / 1024:7.1f} MiB{extra}"
              + (f"  largest ring stores (2 shards) {v['peak_store'] / 2**20:6.2f} MiB" if arm == "ring" else ""))
    print(f"  RSS above no recording: file {(res['file']['maxrss_kb'] - res['off']['maxrss_kb']) / 1024:+.1f} MiB, "
          f"ring {(res['ring']['maxrss_kb'] - res['off']['maxrss_kb']) / 1024:+.1f} MiB "
          f"(ring bound: 2 shards x {cap / 2**20:.0f} MiB)")
    for sh, (delay, events, pinned, evicted) in res["ring"]["dump"].items():
        print(f"  dump near the end, shard {sh:7s}: written {delay:5.2f} s after the trigger, {events} events "
              f"({pinned} kept from before the window, {evicted} evicted)")


def watch_latency(requests: int, after: int, tmp: str) -> None:
    from kvtrace.analysis.watch import Watcher, stamp
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
        st = stamp(out)
        t0 = time.time()
        reports = w.poll()
        if w.checks_run and (not checks or checks[-1][0] != w.checks_run):
            checks.append((w.checks_run, time.time() - t0))
        for r in reports:
            newest = max((m for *_, m in st), default=0) / 1e9
            lat.append((r.finding.check, r.seen_at - newest))
        if done:
            break
        time.sleep(0.2)
    print(f"[watch] recording small x{requests} requests, early-src-free after {after}; poll every 0.2 s; "
          f"checks ran {w.checks_run} times, median {statistics.median(c for _, c in checks):.2f} s each")
    for check, l in lat[:5]:
        print(f"  {check:24s} printed {l:5.2f} s after the newest stream it could have used was written")
    if not lat:
        print("  no finding reported")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--long", type=int, default=3000)
    ap.add_argument("--ring-size", default="8MB")
    ap.add_argument("--only", choices=("throughput", "memory", "watch"), default=None)
    args = ap.parse_args()
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    tmp = tempfile.mkdtemp(prefix="kvtrace-bench-ring-")
    try:
        if args.only in (None, "throughput"):
            throughput(args.reps, args.requests, tmp)
        if args.only in (None, "memory"):
            memory(args.long, args.ring_size, tmp)
        if args.only in (None, "watch"):
            watch_latency(args.requests, args.requests * 3 // 4, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
