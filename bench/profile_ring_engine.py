"""Where ring recording's CPU goes on the reference engine: cProfile of the engine's thread,
no recording vs ring, runs interleaved in one process, per function the time added per run.

    .venv/bin/python bench/profile_ring_engine.py [--runs 6] [--requests 200] [--top 30] [--workload SPEC]

Each arm runs once first (imports and first-use costs paid), then ``--runs`` runs of each,
alternating which goes first. Prints process CPU and the engine thread's CPU per run
(medians, unprofiled runs after the profiled ones: the profiler inflates Python calls), then
the functions whose own time (cProfile ``tottime``) grew most from no recording to ring,
in ms per run. The tap's methods wrap NIXL's: the binding's own time shows under the tap's
name in the ring arm and as the binding in the other, so compare a tap method with the
binding method of the same name. The flush threads are not profiled (their CPU is the
process CPU minus the engine thread's).
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import tempfile
import time

from kvtrace.tracer.engine.runner import run_inprocess
from kvtrace.tracer.engine.workload import load

ARMS = ("off", "ring")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--bottom", type=int, default=8,
                   help="also list the functions whose own time shrank most (the bindings the tap wraps)")
    p.add_argument("--workload", default="small", help="a preset name or a workload TOML file (default small)")
    a = p.parse_args(argv)
    wl = load(a.workload, requests=a.requests)
    tmp = tempfile.mkdtemp(prefix="kvtrace-prof-")

    def run(arm: str) -> None:
        d = None if arm == "off" else os.path.join(tmp, "t.kvtrace")
        run_inprocess(wl, [], d, checksums=False, ring="30s" if arm == "ring" else None)
        if d:
            shutil.rmtree(d, ignore_errors=True)

    try:
        for arm in ARMS:
            run(arm)
        profs = {arm: cProfile.Profile() for arm in ARMS}
        for i in range(a.runs):
            for arm in (ARMS if i % 2 == 0 else ARMS[::-1]):
                profs[arm].enable()
                run(arm)
                profs[arm].disable()
        cpu = {arm: [] for arm in ARMS}
        for i in range(a.runs):
            for arm in (ARMS if i % 2 == 0 else ARMS[::-1]):
                c, m = time.process_time(), time.thread_time()
                run(arm)
                cpu[arm].append((time.process_time() - c, time.thread_time() - m))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"reference engine, workload {a.workload} x{a.requests}, checksums off, {a.runs} runs per arm, "
          f"load average {os.getloadavg()[0]:.1f}")
    for arm in ARMS:
        proc = statistics.median(x[0] for x in cpu[arm])
        eng = statistics.median(x[1] for x in cpu[arm])
        print(f"  {arm:<5} process CPU {proc * 1e3:6.1f} ms  engine thread {eng * 1e3:6.1f} ms  "
              f"other threads {(proc - eng) * 1e3:5.1f} ms   (unprofiled, medians)")
    stats = {arm: {k: (v[2], v[1]) for k, v in pstats.Stats(profs[arm]).stats.items()} for arm in ARMS}
    off, ring = stats["off"], stats["ring"]
    n = a.runs

    def own(d, k):
        return d.get(k, (0.0, 0))

    print(f"engine thread, profiled: own time {sum(v[0] for v in off.values()) / n * 1e3:.1f} ms a run "
          f"without recording, {sum(v[0] for v in ring.values()) / n * 1e3:.1f} ms in ring mode")
    print(f"  {'added':>8}  {'off':>8}  {'ring':>8}  calls a run   function (ms a run)")
    ranked = sorted(set(off) | set(ring), key=lambda k: own(off, k)[0] - own(ring, k)[0])
    shown = ranked[:a.top]
    if a.bottom > 0:
        shown += [None] + ranked[-a.bottom:]
    for k in shown:
        if k is None:
            print("  ...")
            continue
        (t0, c0), (t1, c1) = own(off, k), own(ring, k)
        where = f"{os.path.basename(k[0])}:{k[1]}({k[2]})" if k[0] != "~" else k[2]
        print(f"  {(t1 - t0) / n * 1e3:8.2f}  {t0 / n * 1e3:8.2f}  {t1 / n * 1e3:8.2f}  "
              f"{c0 // n:>5} -> {c1 // n:<5} {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
