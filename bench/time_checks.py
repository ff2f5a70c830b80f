"""Wall and CPU time of some checks, each run several times on one derived model, to
compare two versions of a check's SQL (run it with the old and the new code, interleaved).

    python bench/time_checks.py TRACE --checks leak double_free [--old DIR] [--repeat 3] [--threads 2] [--memory 300MB] [--keep]

The model is derived once (cold unless --keep finds saved derived tables), then every check
named is run --repeat times; one line per check: the median and the minimum wall and cpu-s
(this process's CPU time over all its threads: on a shared machine it varies far less than
wall time) and its row count. With --old DIR (a folder of the checks' old .sql files, e.g. from
`git show`), the old and the new SQL run alternately on the same model, and their rows
(sorted) are compared: different rows are an error."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_checks import load  # noqa: E402

from kvtrace.analysis.findings import catalog  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--checks", nargs="+", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--keep", action="store_true", help="keep (and reuse) the derived tables")
    ap.add_argument("--old", default=None, help="a folder of the checks' old .sql files (same names)")
    a = ap.parse_args()
    kw = {"memory_limit": a.memory} if a.memory else {}
    with TraceSession(a.trace, threads=a.threads, keep_derived=a.keep, **kw) as s:
        t, c = time.perf_counter(), time.process_time()
        s.derive()
        print(f"derive {time.perf_counter() - t:.2f} s {time.process_time() - c:.2f} cpu-s  (load {load()})", flush=True)
        cat = catalog()
        versions = (["old"] if a.old else []) + ["new"]
        tot = {v: [0.0, 0.0] for v in versions}
        for name in a.checks:
            sql = {"new": cat[name].sql}
            if a.old:
                with open(os.path.join(a.old, f"{name}.sql")) as f:
                    sql["old"] = f.read()
            walls, cpus, rows = ({v: [] for v in versions} for _ in range(3))
            for i in range(a.repeat):
                for v in (versions if i % 2 == 0 else versions[::-1]):   # alternate which goes first
                    t, c = time.perf_counter(), time.process_time()
                    tbl = s.query(sql[v])
                    walls[v].append(time.perf_counter() - t)
                    cpus[v].append(time.process_time() - c)
                    rows[v].append(sorted(map(repr, tbl.to_pylist())))
            same = all(r == rows[versions[0]][0] for v in versions for r in rows[v])
            for v in versions:
                w, c = statistics.median(walls[v]), statistics.median(cpus[v])
                tot[v][0] += w
                tot[v][1] += c
                print(f"  {name:<28} {v:<3} wall {w:6.3f} (min {min(walls[v]):6.3f}) s  cpu {c:6.3f} "
                      f"(min {min(cpus[v]):6.3f}) s  rows {len(rows[v][0])}", flush=True)
            if not same:
                print(f"  {name}: ROWS DIFFER between versions or runs", flush=True)
                sys.exit(1)
        for v in versions:
            print(f"checks {v} (medians) {tot[v][0]:.2f} s {tot[v][1]:.2f} cpu-s  (load {load()})")

if __name__ == "__main__":
    main()
