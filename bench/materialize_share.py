"""How much of each derived SQL table's cost is only storing its rows: per object, the cpu
of building it (TraceSession.derive, dependencies built first) beside the cpu of copying the
finished table once more (CREATE TEMP TABLE ... AS SELECT * FROM it), which is the floor any
rewrite of its query keeps as long as the table is materialized with the same columns.

    python bench/materialize_share.py TRACE [--threads 2] [--objects a b]

Reading: an object whose copy is most of its build cost gains little from a better join
plan; narrower rows (integer keys, strings looked up at the end) or not materializing it
(a view read once) are what would make it cheaper."""
from __future__ import annotations

import argparse
import time

from kvtrace.analysis.session import TraceSession
from kvtrace.model.registry import build_order, registry
from kvtrace.model.sqltext import query_sql


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--objects", nargs="*", default=None)
    a = ap.parse_args()
    rows = []
    with TraceSession(a.trace, threads=a.threads, keep_derived=False) as s:   # cold: nothing read back
        for name in build_order(registry(), a.objects):
            c = time.process_time()
            s.derive([name])
            build = time.process_time() - c
            if [k for (k,) in s.execute(query_sql("object_kind"), [name]).fetchall()] != ["table"]:
                continue
            n = s.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            c = time.process_time()
            s.execute(f'CREATE OR REPLACE TEMP TABLE _copy AS SELECT * FROM "{name}"')
            copy = time.process_time() - c
            s.execute("DROP TABLE _copy")
            rows.append((name, n, build, copy))
    print(f"{'object':<16} {'rows':>11} {'build cpu-s':>12} {'copy cpu-s':>11} {'share':>6}")
    for name, n, build, copy in sorted(rows, key=lambda r: -r[2]):
        print(f"{name:<16} {n:>11,} {build:>12.2f} {copy:>11.2f} {copy / build if build else 0:>6.0%}")
    tb, tc = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"{'total':<16} {'':>11} {tb:>12.2f} {tc:>11.2f} {tc / tb if tb else 0:>6.0%}")


if __name__ == "__main__":
    main()
