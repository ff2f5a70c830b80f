"""TraceSession: one trace (all shards) opened read-only in embedded DuckDB.

The UI, the checks and the CLI talk to this interface, never to files:

    s = TraceSession("run.kvtrace")
    s.query("select kind, count(*) from events group by 1")   # -> pyarrow.Table
    s.notes                                                     # truncation / missing shards

Base views: ``events``, ``descs``, ``dlists``, ``layouts`` (each with a leading ``shard``
column), read from the Parquet index under ``_index/`` (see index.py).
"""
from __future__ import annotations

import os

import pyarrow as pa

from ..tracer.schema import TABLES
from .index import ensure_index


class TraceSession:
    """A read-only DuckDB session over a trace directory.

    Args:
        path: the trace directory.
        threads: DuckDB worker threads (None: DuckDB's default).
    Raises:
        kvtrace.tracer.TraceError: the trace is missing, foreign or unreadable.
    """

    def __init__(self, path: str, threads: int | None = None):
        import duckdb  # ~0.1 s import; only sessions need it

        self.trace, self.index_dir = ensure_index(os.fspath(path))
        self.path = self.trace.path
        self.notes: list[str] = list(self.trace.notes)
        self.con = duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads={int(threads)}")
        for t in TABLES:
            p = os.path.join(self.index_dir, t + ".parquet").replace("'", "''")
            self.con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{p}')")

    def query(self, sql: str, params: list | None = None) -> pa.Table:
        """Run SQL and return the result as an Arrow table."""
        return self.con.execute(sql, params or []).to_arrow_table()

    def execute(self, sql: str, params: list | None = None):
        """Run SQL and return the DuckDB cursor (for row-by-row or scalar use)."""
        return self.con.execute(sql, params or [])

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "TraceSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
