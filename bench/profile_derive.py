"""Per derived object: wall time and peak RSS of building it, in build order (dependencies
first, so each time is that object's own cost), then the checks, each timed.

    python bench/profile_derive.py TRACE [--threads 2] [--memory 4GB] [--objects a b]

Prints one line per object, sorted by build order, then the slowest first; use it to find
what to speed up (bench_checks.py gives the totals). "save" is the part of an object's wall
time spent moving derived tables out of memory past the cap's share (TraceModel._compact:
writing their Parquet files), so "build" is the object's own SQL or Python.

--straight writes every SQL table straight from its query to its saved Parquet file, as a
trace whose derived tables will pass the memory share does from its first table (TraceModel
._past_share: the 10M synthetic trace under the default cap). Without it a smaller trace
builds its tables in memory and writes them at close, outside these times, so comparing a
1M profile with a 10M one compares building alone with building + writing: use it on both
sizes to see how each object's own cost grows."""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_checks import PeakRSS, load  # noqa: E402

from kvtrace.analysis.findings import catalog  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402
from kvtrace.model.registry import build_order, registry  # noqa: E402
from kvtrace.model.trace import TraceModel  # noqa: E402

_SAVE = [0.0]
_compact = TraceModel._compact


def _timed_compact(self) -> None:
    t = time.perf_counter()
    try:
        _compact(self)
    finally:
        _SAVE[0] += time.perf_counter() - t


TraceModel._compact = _timed_compact


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--objects", nargs="*", default=None, help="only these objects (and what they need)")
    ap.add_argument("--checks", action="store_true", help="also time every check")
    ap.add_argument("--straight", action="store_true",
                    help="write every SQL table straight to its saved file, as past the memory share")
    a = ap.parse_args()
    rss = PeakRSS()
    kw = {"memory_limit": a.memory} if a.memory else {}
    t0 = time.perf_counter()
    s = TraceSession(a.trace, threads=a.threads, **kw)
    if a.straight:
        if s._store is None:
            ap.error("--straight needs the derived tables saved (keep_derived, a writable index)")
        s._past_share = True
    print(f"open {time.perf_counter() - t0:.2f} s  straight {s._past_share}  (load {load()})", flush=True)
    rss.step()
    times, cpu = {}, {}
    total = ctotal = 0.0
    for name in build_order(registry(), a.objects):
        t, c, sv = time.perf_counter(), time.process_time(), _SAVE[0]
        s.derive([name])
        dt, dc, dsv = time.perf_counter() - t, time.process_time() - c, _SAVE[0] - sv
        total += dt
        ctotal += dc
        times[name] = dt
        cpu[name] = dc
        print(f"  {name:<18} {dt:7.2f} s {dc:7.2f} cpu-s  {rss.step():4.2f} GB  (save {dsv:5.2f} s)", flush=True)
    # cpu-s: this process's CPU time over all its threads; on a shared machine it varies
    # far less than wall time, so rank by it
    print(f"derive total {total:.2f} s, {ctotal:.2f} cpu-s, of which saving {_SAVE[0]:.2f} s  (load {load()})")
    print("most cpu: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])[:10]))
    if a.checks:
        tc = time.perf_counter()
        per = {}
        for name in catalog():
            t = time.perf_counter()
            s.findings([name])
            per[name] = time.perf_counter() - t
        print(f"checks total {time.perf_counter() - tc:.2f} s {rss.step():4.2f} GB  (load {load()})")
        print("slowest checks: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:8]))
    s.close()


if __name__ == "__main__":
    main()
