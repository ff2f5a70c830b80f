"""LiveModel: a trace model that follows a trace while it is written (``kvtrace watch``).

A TraceModel is opened once per trace state: Parquet index, connection, views, cut. A
watcher that re-checks every few tenths of a second would pay all of that on every
flush. This model keeps one DuckDB connection and holds the base tables in memory
(``live_events`` ...: every shard's rows, shard column first, like the index);
:meth:`LiveModel.refresh` appends only the rows each stream gained since the last
refresh, then drops the derived objects and recomputes the cut, so the next
``derive()`` / ``findings()`` sees the trace as it is now. The SQL is the same as
``check``'s: a complete trace gives the same findings.

While some shard is still being written its facts end at different times in every
process (each recorder flushes its own buffer every ``flush_interval``), so a snapshot
can hold one side of a fact before the other. When every shard stamps its events with
this host's monotonic clock (``shard.json`` ``clock``), the model cuts every shard at a
*time frontier*: the latest time up to which every live shard's events are on disk. A
live shard's events are on disk up to its last written event and, since its recorder
flushes at least every ``quiet_s`` (or twice the ``flush_interval_s`` its shard.json
states, if longer), up to ``now - quiet_s`` whatever it wrote; the
frontier is the smallest of those, less ``skew_s`` (a thread can take its seq just before
another thread takes a later seq and an earlier timestamp). Below the frontier the
snapshot is consistent, so a finding there does not depend on which buffers happened to
be flushed. ``frontier`` is None when the shards' clocks cannot be compared; a watcher
must then let findings settle (watch.py). ``behind``: recorded events lie past the
frontier, so a refresh shows more as time passes even when nothing new is written.
"""
from __future__ import annotations

import os
import socket
import time
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..tracer.reader import open_trace
from ..tracer.schema import SCHEMAS, TABLES
from .index import index_dir_for
from .sqltext import query_sql
from .live_window import LiveWindow
from .trace import TraceModel

#: the base views every reader sees, over the in-memory tables
_BASE_VIEWS = {"events": "live_events", "descs": "live_descs", "dlists": "live_dlists",
               "layouts": "live_layouts", "recorded_events": "live_events", "recorded_descs": "live_descs"}


def _schema(table: str) -> pa.Schema:
    return pa.schema([pa.field("shard", pa.string())] + [pa.field(f.name, f.type) for f in SCHEMAS[table]])


_FOREVER = 1 << 62   # a time past every event (a complete trace is analysed to its end)


def _with_shard(shard: str, table: str, rows: pa.Table) -> pa.Table:
    """``rows`` of one stream with the shard column in front, as the live tables hold them."""
    rows = rows.add_column(0, "shard", pa.array([shard] * len(rows), pa.string()))
    return pa.Table.from_arrays(rows.columns, schema=_schema(table))


class LiveModel(TraceModel):
    """A TraceModel over a trace being written; :meth:`refresh` brings it up to date.

    Args:
        path: the trace directory.
        threads, memory_limit: as TraceModel.
        quiet_s: a recorder flushes at least this often (its flush interval, 0.2 s by
            default, with margin): bounds how old an unwritten event can be.
        skew_s: how far a shard's timestamps may run out of seq order.
        now_ns: this host's monotonic clock (injected for tests).
        window_s: analyse only the last this many seconds plus what they still refer to
            (live_window.py); None: the whole trace.
        window_slack_s: how long the window keeps an owner after it stopped being live.
    Raises:
        kvtrace.tracer.TraceError: the trace is missing, foreign or unreadable.
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None,
                 quiet_s: float = 0.5, skew_s: float = 0.1, now_ns: Callable[[], int] = time.monotonic_ns,
                 window_s: float | None = None, window_slack_s: float = 1.0):
        # no TraceModel.__init__: no Parquet index, the base tables live in the connection
        import duckdb

        from . import memory
        cap = memory.resolve(memory_limit)
        self.trace = open_trace(os.fspath(path))
        self.path = self.trace.path
        self.index_dir = index_dir_for(self.path)
        config = {"preserve_insertion_order": False, "memory_limit": cap,
                  "temp_directory": memory.spill_dir(self.index_dir)}
        if threads:
            config["threads"] = int(threads)
        self.con = duckdb.connect(":memory:", config=config)
        self.con.execute("SET enable_progress_bar = false")   # no progress bar on the terminal (see TraceModel)
        self.con_spill = config["temp_directory"]
        # derive() compresses the derived tables past this share of the cap, as a TraceModel does
        self.cap_bytes = memory.to_bytes(cap)
        self._compact_at = int(self.cap_bytes * memory.COMPACT_SHARE)
        self.quiet_ns, self.skew_ns, self.now_ns = int(quiet_s * 1e9), int(skew_s * 1e9), now_ns
        self._loaded: dict[tuple[str, str], int] = {}    # (shard, table) -> rows in the live tables
        self.window = None if window_s is None else LiveWindow(window_s, window_slack_s)
        self.window_note: str | None = None    # why the window was given up (the whole trace is analysed)
        for t in TABLES:
            self._insert(t, _schema(t).empty_table(), create=True)
        self.clocks = None
        self._built: set[str] = set()
        self._load()
        self.changed = self._analyse()

    # ------------------------------------------------------------------ loading
    def _insert(self, table: str, rows: pa.Table, create: bool = False) -> None:
        self.con.register("_live_rows", rows)
        try:
            if create:
                self.con.execute(f"CREATE TABLE live_{table} AS SELECT * FROM _live_rows")
            else:
                self.con.execute(f"INSERT INTO live_{table} SELECT * FROM _live_rows")
        finally:
            self.con.unregister("_live_rows")

    def _load(self) -> int:
        """Append the rows every stream gained since the last load; returns how many."""
        added = 0
        names = {s.name for s in self.trace.shards}
        for shard in {k[0] for k in self._loaded if k[0] not in names}:   # a shard removed
            self._drop_shard(shard)
        for s in self.trace.shards:
            tables = {t: s.streams[t].table for t in TABLES}
            if any(len(tbl) < self._loaded.get((s.name, t), 0) for t, tbl in tables.items()):
                self._drop_shard(s.name)     # a stream rewritten shorter: load the shard again
            gained = {}
            for t in TABLES:
                tbl = tables[t]
                have = self._loaded.get((s.name, t), 0)
                if len(tbl) > have:
                    part = tbl.slice(have).select(SCHEMAS[t].names)
                    self._insert(t, _with_shard(s.name, t, part))
                    gained[t] = part
                    added += len(tbl) - have
                self._loaded[(s.name, t)] = len(tbl)
            if gained:
                self._feed_window(s.name, gained)
        return added

    def _drop_shard(self, shard: str) -> None:
        for t in TABLES:
            self.con.execute(f"DELETE FROM live_{t} WHERE shard = ?", [shard])
            self._loaded.pop((shard, t), None)
        if self.window is not None:
            self.window.forget(shard)

    def _feed_window(self, shard: str, rows: dict[str, pa.Table]) -> None:
        if self.window is None:
            return
        try:
            self.window.feed(shard, rows)
        except (pa.ArrowException, TypeError, ValueError, KeyError, IndexError) as e:
            # rows the flight recorder's bookkeeping cannot follow (a foreign writer): keep
            # every row instead, and say so
            self.window.close()
            self.window = None
            self.window_note = (f"the analysis window was given up at rows of shard {shard} ({e}); "
                                "the whole trace is analysed")

    def _move_window(self) -> bool:
        """Let the live tables go of what the window no longer keeps, when it is due (a window
        ending where the last cut's analysis ended); True if it moved."""
        w = self.window
        if w is None or not self.trace.shards or self._host_clock() is None:
            return False
        # the window ends where the last cut's analysis ended, not now: a re-check slower than
        # the window must not let rows go that it loaded past its frontier and never checked
        upto = getattr(self, "_analysed_to", None)
        if upto is None:
            return False
        now = min(self.now_ns(), upto)
        if not w.due(now):
            return False
        kept = w.advance(now)
        for shard, tables in kept.items():
            # the live tables already hold every row the window keeps: delete the others (the
            # events by seq; the descriptor rows by posting, with those whose posting is not
            # loaded yet, which the store does not hold); layouts and lists are always kept
            seqs = pa.concat_arrays([b.column("seq") for b in tables["events"]]) if tables["events"] \
                else pa.array([], pa.int64())
            xfers = [b.column("xfer") for b in tables["descs"] + w.waiting(shard)]
            xfers = pa.concat_arrays(xfers) if xfers else pa.array([], pa.int64())
            self._delete_all_but(shard, "events", "seq", seqs)
            self._delete_all_but(shard, "descs", "xfer", xfers)
        return True

    def _delete_all_but(self, shard: str, table: str, column: str, keep: pa.Array) -> None:
        """Delete the shard's rows of live_<table> whose ``column`` is not among ``keep``."""
        self.con.register("_live_keep", pa.table({"k": pc.drop_null(pc.unique(keep))}))
        try:
            self.con.execute(query_sql(f"live_window_delete_{table}"), [shard])
        finally:
            self.con.unregister("_live_keep")

    def _host_clock(self) -> str | None:
        """This host's monotonic clock's name when every shard stamps its events with it."""
        here = f"monotonic_ns@{socket.gethostname()}"
        if not self.trace.shards or any(s.info.get("clock") != here for s in self.trace.shards):
            return None
        return here

    def refresh(self, force: bool = False) -> int:
        """Re-read the trace's streams, load the rows they gained and redo the cut; the
        derived objects are dropped (the next derive() builds them anew). When no row
        was added and the cut's inputs (shards, their state, the frontier's per-shard
        limit) are as before, the cut would be the same: everything is kept and
        ``changed`` is False (``force``: redo it all the same). Returns the number of
        rows added.

        Raises:
            kvtrace.tracer.TraceError: the trace became unreadable.
        """
        self.trace = open_trace(self.path)
        # the window moves before loading: every row it can leave behind was loaded by an
        # earlier refresh, and so analysed by the re-check that followed it
        moved = self._move_window()
        added = self._load()
        self.changed = self._analyse(unchanged_rows=added == 0 and not moved and not force)
        return added

    # ------------------------------------------------------------------ the cut
    def _analyse(self, unchanged_rows: bool = False) -> bool:
        """Drop the derived objects, point the base views at everything loaded, then at
        the consistent cut (with the live frontier) as cut.apply does. With
        ``unchanged_rows`` (nothing loaded since the last cut) and the same inputs to the
        cut as then, nothing is dropped; returns whether anything was redone."""
        from . import cut
        from .sqltext import query_sql
        self.frontier = None
        self.behind = False   # events past the frontier: a later refresh sees more, even if nothing is written
        complete = cut.is_complete(self.trace)
        limit = None if complete else self._frontier_limit()
        # what this cut analyses, in time: all of a complete trace, else up to the frontier
        # (None: clocks not comparable); the window never lets go of rows past it
        self._analysed_to = _FOREVER if complete else self.frontier
        state, missing = cut.shard_state(self.trace)
        key = ([s.name for s in self.trace.shards], {n: sorted(k) for n, k in state.items()}, missing, limit,
               list(self.trace.notes))
        if unchanged_rows and key == getattr(self, "_cut_key", None):
            return False
        self._cut_key = key
        keep = set(_BASE_VIEWS) | {f"live_{t}" for t in TABLES}
        for kind in ("VIEW", "TABLE"):
            fn = "duckdb_views()" if kind == "VIEW" else "duckdb_tables()"
            for (name,) in self.con.execute(f"SELECT {'view_name' if kind == 'VIEW' else 'table_name'} FROM {fn} "
                                            "WHERE NOT internal AND schema_name = 'main'").fetchall():
                if name not in keep:
                    self.con.execute(f'DROP {kind} IF EXISTS "{name}"')
        for view, table in _BASE_VIEWS.items():
            self.con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM {table}")
        self._built = set()
        self._caps = None
        self.clocks = None
        self.shards = [s.name for s in self.trace.shards]
        self.notes = list(self.trace.notes) + ([self.window_note] if self.window_note else [])
        # descriptor rows missing with nothing counted lost (a damaged stream), as check does:
        # their absence must not read as "not sent". A live shard's tail posts whose rows are
        # not written yet are cut as a lost tail first (cut.compute), not called missing.
        silent = cut.silent_desc_loss(self.con, self.trace)
        repeated = cut.repeated_xfer_posts(self.con)   # two postings under one id, as check does
        if complete and not silent and not repeated:
            self.cuts, self.unknowns = {}, cut.untraced_unknowns(self.trace)
            self.notes += [u.note() for u in self.unknowns]
            return True
        self.cuts = cut.compute(self, limit, silent=silent, repeated=repeated)
        self.con.from_arrow(cut.shard_cut_table(self.trace, self.cuts, [])).create("shard_cut")
        self.con.execute(query_sql("cut_events"))
        self.con.execute(query_sql("cut_descs"))
        self.unknowns = (cut.unknowns(self.cuts, missing) + cut.start_unknowns(self, self.cuts)
                         + cut.untraced_unknowns(self.trace))
        self.notes += [u.note() for u in self.unknowns]
        return True

    def _quiet_ns(self, shard) -> int:
        """How long a shard's recorder may hold an event unwritten: quiet_s, or twice the
        flush interval its shard.json states (a writer that flushes less often)."""
        every = shard.info.get("flush_interval_s")
        if isinstance(every, (int, float)) and every > 0:
            return max(self.quiet_ns, int(2 * every * 1e9) + 100_000_000)
        return self.quiet_ns

    def _frontier_limit(self) -> dict[str, tuple[int, str]] | None:
        """Per shard, the last seq at or before the time frontier (see the module doc);
        None when the shards' clocks are not this host's monotonic clock."""
        if self._host_clock() is None:
            return None
        last = dict(self.con.execute("SELECT shard, max(t_ns) FROM live_events GROUP BY shard").fetchall())
        now = self.now_ns()
        live = []
        for s in self.trace.shards:
            if s.closed:
                continue
            floor = now - self._quiet_ns(s)
            live.append(max(last.get(s.name) or floor, floor))
        if not live:
            return None
        self.frontier = min(live) - self.skew_ns
        seqs = dict(self.con.execute("SELECT shard, max(seq) FROM live_events WHERE t_ns <= ? GROUP BY shard",
                                     [self.frontier]).fetchall())
        ends = dict(self.con.execute("SELECT shard, max(seq) FROM live_events GROUP BY shard").fetchall())
        limit = {s.name: -1 if seqs.get(s.name) is None else int(seqs[s.name]) for s in self.trace.shards}
        self.behind = any(ends.get(n) is not None and ends[n] > seq for n, seq in limit.items())
        why = "not all of its processes' events up to now are written yet (a recording in progress)"
        return {n: (seq, f"shard {n}: {why}") for n, seq in limit.items()}
