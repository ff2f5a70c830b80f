"""A digest of every derived object's rows and of the findings of a trace, to show a
change to the derivation keeps them identical: run it with the old and the new code on the
same traces and diff the output.

    python bench/derived_digest.py TRACE [TRACE ...] [--threads 2] [--memory 5GB]

Per trace, one line per derived table: name, row count, and an order-independent digest
of its rows (each row hashed by DuckDB, the hashes summed), then the findings as
(check, count) with a digest of their events. Nothing is saved beside the index
(keep_derived off), so each run derives cold; --keep derives cold with the derived tables
saved (so, under a small --memory, tables past the memory share are written to Parquet
while deriving and read back from there: the out-of-core path)."""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil

from kvtrace.analysis.session import TraceSession
from kvtrace.model.sqltext import query_sql


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--keep", action="store_true", help="save the derived tables (out-of-core path)")
    ap.add_argument("--drop", nargs="*", default=[], help="columns left out of every digest (e.g. ones a change adds)")
    a = ap.parse_args()
    kw = {"memory_limit": a.memory} if a.memory else {}
    for path in a.traces:
        print(f"== {path}")
        if a.keep:
            from kvtrace.model.index import index_dir_for
            from kvtrace.model.persist import DERIVED_DIR
            shutil.rmtree(os.path.join(index_dir_for(path), DERIVED_DIR), ignore_errors=True)   # cold
        with TraceSession(path, threads=a.threads, keep_derived=a.keep, **kw) as s:
            s.derive()
            for name in sorted(s._built):
                kind = s.execute(query_sql("object_kind"), [name]).fetchall()
                if not kind:        # macros hold no rows
                    continue
                # the sum of row hashes: the same multiset of rows gives the same digest
                cols = [c for (c,) in s.execute(f'SELECT column_name FROM (DESCRIBE "{name}")').fetchall()]
                drop = [c for c in a.drop if c in cols]
                src = f'(SELECT * EXCLUDE ({", ".join(drop)}) FROM "{name}")' if drop else f'"{name}"'
                n, d = s.execute(f'SELECT count(*), coalesce(sum(hash(t)::HUGEINT), 0) FROM {src} t').fetchall()[0]
                print(f"{name:<18} {n:>10} {d}")
            fs = s.findings()
            for f in sorted(fs, key=lambda f: (f.check, f.request or "", f.agent or "", f.pool or "", f.message)):
                ev = hashlib.sha1(repr(sorted(map(repr, f.events))).encode()).hexdigest()[:12]
                print(f"finding {f.check} {f.severity} {f.request} {f.agent} {f.pool} {f.count} {ev} {f.message[:80]}")
            print(f"findings {len(fs)}")


if __name__ == "__main__":
    main()
