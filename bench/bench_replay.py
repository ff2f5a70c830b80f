"""Replay benchmark: schedules explored per second with the symbolic executor on a
200-request trace (target >= 50/s), and the byte executor's bytes/s, measured side by
side in one run.

usage: python bench/bench_replay.py [--requests 200] [--seeds 100] [--out bench/results/replay.txt]
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--slot-bytes", type=int, default=4096)
    ap.add_argument("--out")
    a = ap.parse_args()

    from kvtrace.replay.api import make_executor, make_scheduler, run_graph
    from kvtrace.replay.graph import load
    from kvtrace.replay.synth import pd_workload

    lines = []
    say = lambda s: (print(s), lines.append(s))  # noqa: E731
    with tempfile.TemporaryDirectory() as d:
        path = pd_workload(os.path.join(d, "b.kvtrace"), requests=a.requests, concurrency=a.concurrency,
                           layers=4, pages=4, slot_bytes=a.slot_bytes, bug="early-src-free")
        t0 = time.perf_counter()
        g = load(path)
        t_load = time.perf_counter() - t0
        say(f"trace: {a.requests} requests (early-src-free), {g.n_prog} events, {len(g.move_xfer)} moves, "
            f"{len(g.mem.cells)} cells of {a.slot_bytes} B; load {t_load:.2f} s")
        run_graph(g, make_scheduler("eager"), make_executor())       # expectations + caches, once
        for sched in ("random", "pct", "lazy", "conflicts"):
            n = a.seeds if sched != "lazy" else 10
            fails = 0
            t0, c0 = time.perf_counter(), time.process_time()
            for seed in range(n):
                fails += run_graph(g, make_scheduler(sched, seed), make_executor(),
                                   compare_recorded=False).verdict.failed   # as explore runs them
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            say(f"symbolic {sched:9s}: {n / dc:7.1f} schedules/s of CPU time, {n / dt:7.1f}/s wall "
                f"({n} schedules, {fails} failing) — target >= 50/s: {'met' if n / dc >= 50 else 'MISSED'}")
        for name in ("bytes", "nixl"):
            for sched in ("eager", "random"):
                ex = make_executor(name)
                t0 = time.perf_counter()
                o = run_graph(g, make_scheduler(sched, 1), ex)
                dt = time.perf_counter() - t0
                t1 = time.perf_counter()
                run_graph(g, make_scheduler(sched, 1), make_executor())
                dsym = time.perf_counter() - t1
                say(f"{name:5s} executor {sched:6s}: {ex.bytes_moved / dt / 1e6:7.1f} MB/s moved over the whole run "
                    f"({ex.bytes_moved / 1e6:.1f} MB in {dt:.2f} s incl. writes/reads/verify), "
                    f"{ex.bytes_moved / max(ex.copy_s, 1e-9) / 1e6:.0f} MB/s inside the copy routine; "
                    f"symbolic same schedule {dsym:.3f} s (x{dt / dsym:.0f}); verdict {'CORRUPTED' if o.verdict.failed else 'clean'}")
    say(f"machine: {platform.machine()}, {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} (shared machine: wall rates vary, CPU-time rates less)")
    if a.out:
        with open(a.out, "w") as f:
            f.write("$ python bench/bench_replay.py " + " ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if k != "out" and v is not None) + "\n")
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
