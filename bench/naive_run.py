"""The naive checker of bench/naive_checker/*.sql: straightforward DuckDB SQL over the
trace's Parquet index (the same index kvtrace builds), no derived tables, no
happens-before: the yardstick bench_checks.py compares `kvtrace check` against.

    python bench/naive_run.py TRACE [--threads 2]
"""
from __future__ import annotations

import argparse
import glob
import os
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "naive_checker")


def run(index_dir: str, threads: int | None = None, memory: str | None = None) -> dict:
    """Run every naive check; returns {hazard: (rows, seconds)}."""
    import duckdb

    config = {"preserve_insertion_order": False}
    if threads:
        config["threads"] = int(threads)
    if memory:
        config["memory_limit"] = memory
    con = duckdb.connect(":memory:", config=config)
    for t in ("events", "descs", "layouts"):
        # loaded as tables (timed with the checks): ASOF joins over a view of several
        # Parquet files re-read them and can take minutes
        con.read_parquet(sorted(glob.glob(os.path.join(index_dir, t, "*.parquet")))).create(t)
    out = {}
    for f in sorted(glob.glob(os.path.join(HERE, "*.sql"))):
        with open(f) as fh:
            sql = fh.read()
        t = time.perf_counter()
        n = con.sql(f"SELECT count(*) FROM ({sql})").fetchall()[0][0]
        out[os.path.basename(f)[:-4]] = (n, time.perf_counter() - t)
    con.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    from kvtrace.model.index import ensure_index
    _, d = ensure_index(a.trace)
    res = run(d, a.threads)
    for k, (n, s) in res.items():
        print(f"{k:24s} {n:8d} rows {s:6.2f} s")
    print(f"total {sum(s for _, s in res.values()):.2f} s")


if __name__ == "__main__":
    main()
