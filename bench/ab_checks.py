"""Every check's SQL, old vs new, interleaved on one warm model of a trace.

Opens the trace (its derived tables saved beside the index are read back: run
`kvtrace check TRACE` once first), then for each check runs the SQL of the check file
under OLD/analysis/sql (an older checkout, e.g. `git worktree add /tmp/old main`) and
the working tree's, alternating, --reps times each; prints the best wall time of each,
the ratio and whether their rows agree (as sorted reprs). Then one findings() call over
all checks (the runner, as `kvtrace check` does it) for the end-to-end time.

    .venv/bin/python bench/ab_checks.py TRACE --old /tmp/old [--reps 3] [--threads 2] [--memory 5GB] [--only a,b]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--old", required=True, help="checkout whose analysis/sql/*.sql are the 'before'")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default="5GB")
    ap.add_argument("--only", default=None)
    ap.add_argument("--also", default="attribution",
                    help="other queries of analysis/sql to compare too (comma-separated; '' for none)")
    ap.add_argument("--no-findings", action="store_true", help="skip the end-to-end findings() call")
    a = ap.parse_args()
    from kvtrace.analysis.findings import catalog
    from kvtrace.analysis.session import TraceSession
    print(f"# {' '.join(sys.argv)}\n# load at start {load()}", flush=True)
    t = time.perf_counter()
    s = TraceSession(a.trace, threads=a.threads, memory_limit=a.memory)
    s.derive()
    print(f"  open + derive (warm) {time.perf_counter() - t:6.2f} s", flush=True)
    only = a.only.split(",") if a.only else None
    tot_o = tot_n = 0.0
    from kvtrace.analysis.export_sql import load_sql
    todo = [(n, c.sql) for n, c in catalog().items() if not only or n in only]
    todo += [(n, load_sql(n)) for n in (a.also.split(",") if a.also else []) if not only or n in only]
    for name, sql in todo:
        p = os.path.join(a.old, "analysis", "sql", f"{name}.sql")
        old = open(p).read() if os.path.exists(p) else None
        to, tn = [], []
        ro = rn = None
        for _ in range(a.reps):
            if old is not None:
                t = time.perf_counter()
                ro = s.con.sql(old).fetchall()
                to.append(time.perf_counter() - t)
            t = time.perf_counter()
            rn = s.con.sql(sql).fetchall()
            tn.append(time.perf_counter() - t)
        bo, bn = (min(to) if to else float("nan")), min(tn)
        same = "same" if ro is not None and sorted(map(repr, ro)) == sorted(map(repr, rn)) else (
            "new check" if ro is None else "DIFFERENT")
        if to:
            tot_o += bo
        tot_n += bn
        print(f"  {name:28s} {bo:6.2f} s -> {bn:6.2f} s  x{bo / max(bn, 1e-6):5.1f}  rows "
              f"{'-' if ro is None else len(ro)}/{len(rn)} {same}", flush=True)
    print(f"  {'all (sum of best)':28s} {tot_o:6.2f} s -> {tot_n:6.2f} s  x{tot_o / max(tot_n, 1e-6):5.1f}"
          f"  (load {load()})", flush=True)
    if not a.no_findings:
        t = time.perf_counter()
        f = s.findings(only)
        print(f"  findings() new, all checks in one call: {time.perf_counter() - t:6.2f} s, {len(f)} findings"
              f" (load {load()})", flush=True)
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
