"""TraceSession: one trace (all shards) opened read-only in embedded DuckDB.

The UI, the checks and the CLI talk to this interface, never to files:

    s = TraceSession("run.kvtrace")
    s.query("select kind, count(*) from events group by 1")   # -> pyarrow.Table
    s.findings()                                                # -> list[Finding]
    s.checks_skipped                                            # [(check, why)]
    s.verdict()                                                 # the seeds' question
    s.notes                                                     # truncation / missing shards

Base views: ``events``, ``descs``, ``dlists``, ``layouts`` (each with a leading ``shard``
column), read from the Parquet index under ``_index/`` (see index.py). Derived tables
(``sync_pairs``, ``clocks``, ``xfers``, ``xfer_seen``, ``slot_ev``, ``holdings``,
``desc_end``, ``end_hold`` ...; one ``sql/view_*.sql`` each) are built on first use of
``derive()`` / ``findings()``, so opening stays cheap for the TUI.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa

from ..tracer.schema import TABLES
from .findings import CAPABILITIES, Finding, catalog, fold, rows_to_findings, view_sql
from .hb import compute_clocks
from .index import ensure_index

#: derived views in build order; "clocks" and "xfer_seen" are computed in Python
DERIVED = ("sync_pairs", "clocks", "xfers", "xfer_obs", "xfer_seen", "slot_ev", "slot_life",
           "holdings", "desc_end", "dl_region", "poison", "end_hold", "reads", "writes", "inflight_pairs")


class TraceSession:
    """A read-only DuckDB session over a trace directory.

    Args:
        path: the trace directory.
        threads: DuckDB worker threads (None: DuckDB's default).
        memory_limit: DuckDB memory cap (env KVTRACE_DUCKDB_MEMORY overrides); past it
            derived tables spill to a temp folder.
    Raises:
        kvtrace.tracer.TraceError: the trace is missing, foreign or unreadable.
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str = "4GB"):
        import duckdb  # ~0.1 s import; only sessions need it

        self.trace, self.index_dir = ensure_index(os.fspath(path))
        self.path = self.trace.path
        self.notes: list[str] = list(self.trace.notes)
        self.con = duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads={int(threads)}")
        # derived tables are sets; keeping scan order only costs time
        self.con.execute("SET preserve_insertion_order=false")
        # bounded memory: DuckDB spills to disk past this instead of taking the machine
        mem = os.environ.get("KVTRACE_DUCKDB_MEMORY", memory_limit)
        spill = os.path.join(tempfile.gettempdir(), f"kvtrace-duckdb-{os.getpid()}").replace("'", "''")
        self.con.execute(f"SET memory_limit='{mem}'")
        self.con.execute(f"SET temp_directory='{spill}'")
        for t in TABLES:
            p = os.path.join(self.index_dir, t + ".parquet").replace("'", "''")
            self.con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{p}')")
        self.shards: list[str] = [s.name for s in self.trace.shards]
        # a partial trace is analysed up to its consistent cut (see cut.py)
        from .cut import apply as apply_cut
        self.cuts, self.unknowns = apply_cut(self.con, self.trace, self.index_dir)
        self.notes += [u.note() for u in self.unknowns]
        #: (check name, why it could not run) after findings()
        self.checks_skipped: list[tuple[str, str]] = []
        self._derived = False
        self._findings: dict[str, list[Finding]] = {}
        self._caps: dict[str, bool] | None = None

    # ------------------------------------------------------------------ queries
    def query(self, sql: str, params: list | None = None) -> pa.Table:
        """Run SQL and return the result as an Arrow table (an empty one for statements)."""
        if params:
            return self.con.execute(sql, params).to_arrow_table()
        rel = self.con.sql(sql)
        return rel.to_arrow_table() if rel is not None else pa.table({})

    def execute(self, sql: str, params: list | None = None):
        """Run SQL and return the DuckDB cursor (for row-by-row or scalar use)."""
        return self.con.execute(sql, params or [])

    # ------------------------------------------------------------------ derived views
    def derive(self) -> None:
        """Build the derived tables (happens-before, ownership, descriptor targets). Idempotent."""
        if self._derived:
            return
        con = self.con
        con.register("shards", pa.table({"shard": pa.array(self.shards, pa.string()),
                                         "sidx": pa.array(range(len(self.shards)), pa.int32())}))
        con.execute(f"SET VARIABLE nshards = {len(self.shards)}")
        con.execute(_MACROS)
        for name in DERIVED:
            if name == "clocks":
                self._build_clocks()
            elif name == "xfer_seen":
                self._build_seen()
            elif name == "poison":
                self._build_poison()
            else:
                con.execute(view_sql(name))
        self._derived = True

    def _build_clocks(self) -> None:
        pairs = self.query("SELECT send_sidx, send_seq, recv_sidx, recv_seq FROM sync_pairs "
                           "WHERE send_sidx <> recv_sidx")
        self.clocks = compute_clocks(self.shards, pairs)
        self._clocks_tbl = self.clocks.table()
        self.con.register("clocks", self._clocks_tbl)

    def _build_seen(self) -> None:
        obs = self.query("SELECT x.sidx AS xsidx, o.xfer, o.obs_sidx, o.obs_seq, o.data "
                         "FROM xfer_obs o JOIN shards x ON x.shard = o.shard")
        xs = obs.column("xsidx").to_numpy(zero_copy_only=False).astype(np.int32)
        xf = obs.column("xfer").to_numpy(zero_copy_only=False).astype(np.int64)
        os_ = obs.column("obs_sidx").to_numpy(zero_copy_only=False).astype(np.int64)
        oq = obs.column("obs_seq").to_numpy(zero_copy_only=False).astype(np.int64)
        data = obs.column("data").to_numpy(zero_copy_only=False).astype(bool)
        parts = []
        for k in range(len(self.shards)):
            first = self.clocks.first_knowing(os_, oq, k)
            ok = first >= 0
            parts.append(pa.table({"xsidx": xs[ok], "xfer": xf[ok], "side_sidx": np.full(ok.sum(), k, np.int32),
                                   "first": first[ok], "data": data[ok]}))
        t = pa.concat_tables(parts) if parts else pa.table({"xsidx": [], "xfer": [], "side_sidx": [], "first": [], "data": []})
        self._seen_raw = t
        self.con.register("xfer_seen_raw", t)
        self.con.execute("""
            CREATE OR REPLACE TEMP TABLE xfer_seen AS
            SELECT x.shard, r.xfer, s.shard AS side_shard, r.side_sidx,
                   min(r.first) FILTER (WHERE r.data) AS seen_seq,  -- data known complete from here
                   min(r.first) AS end_seq                           -- transfer known over from here
            FROM xfer_seen_raw r JOIN shards x ON x.sidx = r.xsidx JOIN shards s ON s.sidx = r.side_sidx
            GROUP BY ALL""")

    def _build_poison(self) -> None:
        from ..kernels.checksum import kvh64
        from ..kernels.provenance import poison

        sizes = [int(r[0]) for r in self.con.sql("SELECT DISTINCT slot_bytes FROM lay WHERE slot_bytes > 0").fetchall()]
        # kvh64 of never-written memory per slot size: a read that sees it got nothing
        self._poison = pa.table({"slot_bytes": pa.array(sizes, pa.uint64()),
                                 "checksum": pa.array([int(kvh64(poison(n)[0])) for n in sizes], pa.uint64())})
        self.con.register("poison", self._poison)

    # ------------------------------------------------------------------ capabilities
    def capabilities(self) -> dict[str, bool]:
        """What the trace's raw facts allow (see findings.CAPABILITIES)."""
        if self._caps is None:
            q = lambda sql: self.con.sql(sql).fetchall()[0][0]  # noqa: E731
            kinds = {r[0] for r in self.con.sql("SELECT DISTINCT kind FROM events").fetchall()}
            self._caps = {
                "descs": q("SELECT count(*) > 0 FROM (SELECT 1 FROM descs LIMIT 1)"),
                "layouts": q("SELECT count(*) > 0 FROM layouts"),
                "slots": "alloc" in kinds,
                "writes": "write" in kinds,
                "reads": "read" in kinds,
                "checksums": q("SELECT count(*) > 0 FROM (SELECT 1 FROM events WHERE kind IN ('read','write') "
                               "AND checksums IS NOT NULL AND len(checksums) > 0 LIMIT 1)"),
                "closed": not any(("missing" in n or "not closed" in n or "truncated" in n) for n in self.notes),
            }
        return self._caps

    # ------------------------------------------------------------------ findings
    def findings(self, only: list[str] | None = None) -> list[Finding]:
        """Run the checks (all, or the names in ``only``) and return their findings,
        errors first. Checks that cannot run are listed in ``checks_skipped``."""
        cat = catalog()
        names = list(cat) if not only else list(only)
        unknown = [n for n in names if n not in cat]
        if unknown:
            from ..tracer.reader import TraceError
            raise TraceError(f"unknown check {unknown[0]!r}; known: {', '.join(cat)}")
        self.derive()
        caps = self.capabilities()
        out: list[Finding] = []
        skipped = []
        for n in names:
            c = cat[n]
            missing = [need for need in c.needs if not caps.get(need, False)]
            if missing:
                skipped.append((n, CAPABILITIES[missing[0]]))
                continue
            if n not in self._findings:
                self._findings[n] = rows_to_findings(n, self.query(c.sql))
            out.extend(self._findings[n])
        self.checks_skipped = skipped
        out = fold(out)
        out.sort(key=lambda f: (f.severity != "error", f.check, -f.count, f.request or ""))
        return out

    def verdict(self, findings: list[Finding] | None = None):
        """The seeds' question: which hypothesis the evidence supports and which it rules out."""
        from .verdict import verdict
        return verdict(self, self.findings() if findings is None else findings)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "TraceSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# hb(x_sidx, x_seq, know): event (x_sidx, x_seq) happens-before the event whose knowledge
# vector is `know` (0-based shard index; know[j+1] is the largest seq of shard j known).
_MACROS = """
CREATE OR REPLACE MACRO hb(x_sidx, x_seq, know) AS coalesce(x_seq <= know[x_sidx + 1], false);
CREATE OR REPLACE MACRO ev(s, q) AS {'shard': s, 'seq': q::BIGINT};
"""
