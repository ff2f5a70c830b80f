"""TraceModel: one trace (all shards) opened read-only in embedded DuckDB, with the
derived facts every reader shares.

    m = TraceModel("run.kvtrace")
    m.derive(["sync_pairs"])              # build what you read (and what it requires)
    m.ask("cross_pairs")                  # a named query of queries/*.sql -> pyarrow.Table
    m.query("select kind, count(*) from events group by 1")
    m.capabilities()                      # which facts the trace records

Base views ``events``, ``descs``, ``dlists``, ``layouts`` (each with a leading ``shard``
column) read the Parquet index under ``_index/`` (index.py). Derived objects (pairs,
clocks, transfers, descriptor ends, holdings ...) are one ``sql/<name>.sql`` each or a
Python builder (builders.py), built on demand in the order their ``requires`` give, so
opening stays cheap. They are plain tables, so every cursor of the model sees them.
"""
from __future__ import annotations

import contextlib
import os

import pyarrow as pa

from ..errors import TraceError
from ..tracer.reader import Trace
from .index import ensure_index, scan_paths
from .registry import build_order, registry
from .sqltext import query_sql

#: capability → whether a check that needs it can run (see capabilities())
CAPABILITY_NAMES = ("descs", "layouts", "slots", "writes", "reads", "checksums", "closed")


def _store(index_dir: str, trace_path: str, keep: bool | None):
    """The saved derived tables of this trace state (persist.py), or None when not kept."""
    if keep is None:
        keep = os.environ.get("KVTRACE_KEEP_DERIVED", "1") != "0"
    if not keep:
        return None
    from .persist import Store
    try:
        return Store(index_dir, trace_path)
    except OSError:   # the trace's folder went away or cannot be listed: derive every time
        return None


def _background_early(objs, order: list[str]) -> list[str]:
    """``order`` (dependencies first) rearranged so each background builder runs beside as
    many SQL objects as possible: what the background builders require (and what that
    requires) first, each builder right after the last of it, and the objects that require
    a background builder last. Still dependencies first: the first part holds every
    requirement of its objects, the last part every object that requires one of its own.
    (10M events, in memory: the in-flight sweep, ~7 s on one core, started after
    desc_match_ids and the main thread then waited ~4 s for it at inflight_writes, with
    reads and read_predict_ids still to build: bench/results/checks.txt.)"""
    bg = [n for n in order if objs[n].background]
    pos = set(order)

    def closure(start, step):
        seen, todo = set(), list(start)
        while todo:
            for r in step(todo.pop()):
                if r in pos and r not in seen:
                    seen.add(r)
                    todo.append(r)
        return seen
    early = closure(bg, lambda n: objs[n].requires)                 # every requirement of a builder
    users: dict[str, list[str]] = {}
    for n in order:
        for r in objs[n].requires:
            users.setdefault(r, []).append(n)
    late = closure(bg, lambda n: users.get(n, ())) - set(bg)        # every object needing a builder
    late -= early   # (a builder requiring another's output: that one stays where its users need it)
    out = [n for n in order if n in early and n not in bg]
    out += [n for n in order if n not in early and n not in late and n not in bg]
    for n in bg:
        at = [out.index(r) for r in objs[n].requires if r in out]
        out.insert(max(at) + 1 if at else 0, n)
    return out + [n for n in order if n in late]


class TraceModel:
    """A read-only DuckDB model of a trace directory.

    Args:
        path: the trace directory (or an already opened kvtrace.tracer.reader.Trace).
        threads: DuckDB worker threads (None: DuckDB's default).
        memory_limit: DuckDB memory cap such as "3GB" (None: env KVTRACE_DUCKDB_MEMORY,
            else a fraction of RAM, see memory.py); past it DuckDB spills under the index.
        keep_derived: save every derived table beside the index once built and reuse the
            saved ones (persist.py); None: yes unless env KVTRACE_KEEP_DERIVED=0.
    Raises:
        kvtrace.tracer.TraceError: the trace is missing, foreign or unreadable.
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None,
                 keep_derived: bool | None = None):
        import duckdb  # ~0.1 s import; only models need it

        from . import memory
        cap = memory.resolve(memory_limit)   # bad size: UsageError before any work

        self.trace, self.index_dir = ensure_index(path if isinstance(path, Trace) else os.fspath(path))
        self.path = self.trace.path
        self.notes: list[str] = list(self.trace.notes)
        #: ":memory:", or a file in the spill folder when the derived tables outgrow the cap
        memory.remove_stale_spills(self.index_dir)
        self.database = memory.database_path(self.index_dir, cap)
        self.cap_bytes = memory.to_bytes(cap)   #: the memory cap (Python builders size their chunks by it)
        #: DuckDB's own limit: the cap, or out of core its share of it (memory.py)
        self.duckdb_bytes = memory.duckdb_bytes(self.cap_bytes, self.database)
        config = {
            # derived tables are sets; keeping scan order only costs time
            "preserve_insertion_order": False,
            # bounded memory: DuckDB spills to disk past this instead of taking the machine
            "memory_limit": f"{self.duckdb_bytes // 10**6}MB",
            "temp_directory": memory.spill_dir(self.index_dir),
        }
        if threads:
            config["threads"] = int(threads)
        if self.database != ":memory:":
            os.makedirs(config["temp_directory"], exist_ok=True)
        self.con = duckdb.connect(self.database, config=config)
        # DuckDB's Python client draws a progress bar on the terminal after 2 s of a query:
        # it would land in `kvtrace check`'s output and scribble over the TUI's screen
        self.con.execute("SET enable_progress_bar = false")
        self.con_spill = config["temp_directory"]
        self._compact_at = int(self.cap_bytes * memory.COMPACT_SHARE)
        from ..tracer.schema import TABLES
        for t in TABLES:
            self.con.read_parquet(scan_paths(self.trace, self.index_dir, t)).create_view(t)
        # every recorded event, also past a partial trace's cut (cut.py then points
        # ``events`` at the cut prefix): program order covers what replay re-executes
        self.con.read_parquet(scan_paths(self.trace, self.index_dir, "events")).create_view("recorded_events")
        self.shards: list[str] = [s.name for s in self.trace.shards]
        self.clocks = None   #: hb.Clocks once "clocks" is built
        self._built: set[str] = set()
        #: background builders running: name -> (future, its cursor, what it reads)
        self._pending: dict[str, tuple] = {}
        self._bg_pool = None
        self._caps: dict[str, bool] | None = None
        # a partial trace is analysed up to its consistent cut (cut.py); unknowns say what lies beyond
        from .cut import apply as apply_cut
        self.cuts, self.unknowns = apply_cut(self)
        self.notes += [u.note() for u in self.unknowns]
        if self.database != ":memory:":
            # out of core: the stream files' mapped pages the reader touched (~7% of them,
            # 1.7 GB at 100M events) would stay resident beside the cap; everything reads
            # the index from here on (the timeline too: order.py then decodes the index)
            self.release_streams()
        # only now: the cut above derives objects of the uncut trace, which must never be saved
        self._store = _store(self.index_dir, self.path, keep_derived)
        self._unsaved: list[str] = []   # built, not yet saved (save_derived)
        # derived tables that will pass the memory share anyway: every SQL table goes
        # straight to its saved file from the first (derive: _write_out), never built in
        # memory and moved out later (10M events: -12% derive CPU, no ~10 s stall moving
        # the first tables out at once; bench/results/checks.txt)
        self._past_share = self._store is not None and memory.will_pass_share(self.index_dir, self._compact_at)

    # ------------------------------------------------------------------ queries
    def query(self, sql: str, params: list | None = None) -> pa.Table:
        """Run SQL and return the result as an Arrow table (an empty one for statements)."""
        import duckdb
        try:
            if params:
                return self.con.execute(sql, params).to_arrow_table()
            rel = self.con.sql(sql)
            return rel.to_arrow_table() if rel is not None else pa.table({})
        except duckdb.OutOfRangeException as e:
            raise out_of_range(e) from e

    def execute(self, sql: str, params: list | None = None):
        """Run SQL and return the DuckDB cursor (for row-by-row or scalar use)."""
        return self.con.execute(sql, params or [])

    def ask(self, name: str, params: list | None = None, cursor=None, batches: int | None = None):
        """Run the named query ``queries/<name>.sql`` (parameters bind its ``?``s): its rows as
        an Arrow table, or with ``batches`` a pyarrow RecordBatchReader of batches of about
        that many rows (read them before the next query on the same cursor)."""
        import duckdb
        con = cursor if cursor is not None else self.con
        try:
            if batches:
                return con.sql(query_sql(name), params=params or None).to_arrow_reader(batches)
            return con.sql(query_sql(name), params=params or None).to_arrow_table()
        except duckdb.OutOfRangeException as e:
            raise out_of_range(e) from e

    def cursor(self):
        """A new DuckDB cursor over the same database (one per thread)."""
        return self.con.cursor()

    # ------------------------------------------------------------------ derived objects
    def derive(self, names: list[str] | tuple[str, ...] | None = None) -> None:
        """Build the derived objects ``names`` (default: all) and what they require. Idempotent.

        A background builder (Derived.background) starts as soon as what it requires is
        built and runs in a thread while the SQL objects after it build; an object that
        requires it waits for it, and so does the end of this call. Out of core it runs in
        turn like the others (memory first)."""
        objs = registry()
        if not hasattr(self, "_pending"):   # a LiveModel skips __init__
            self._pending, self._bg_pool = {}, None
        try:
            for name in _background_early(objs, build_order(objs, names)):
                if name in self._built or name in self._pending:
                    continue
                d = objs[name]
                self._await([r for r in d.requires if r in self._pending])
                store = getattr(self, "_store", None)   # a LiveModel keeps none: its trace grows
                if store is not None and store.load(self.con, name):
                    self._built.add(name)
                    continue
                if d.build is not None and d.background and getattr(self, "database", ":memory:") == ":memory:":
                    self._start(d)
                    continue
                if d.build is not None:
                    # out of core (a database file: the tables outgrow the cap) a background
                    # builder runs here, alone: its arrays never sit beside another object's buffers
                    self.build_python(d)
                else:
                    runs = self._piece_params(d)
                    if getattr(self, "_past_share", False) and store is not None and self._write_out(store, d, runs):
                        self._built.add(name)   # already in its saved file, never in memory
                        continue
                    self._create_sql(d, runs)
                self._done(name)
        finally:
            self._await(list(self._pending))

    def _done(self, name: str) -> None:
        self._built.add(name)
        if getattr(self, "_store", None) is not None:
            self._unsaved.append(name)
        self._compact()

    def build_python(self, d) -> None:
        """Run Python builder ``d`` on this thread (a background one too) and create its table.

        Out of core (a database file) it runs alone and DuckDB gets the cap less
        memory.BUILDER_SHARE meanwhile: lowering the limit evicts the Parquet pages DuckDB
        cached while scanning the saved tables, which otherwise fill the whole cap beside
        the builder's arrays (100M events, 3 GB cap: 5.0 GB peak in the in-flight sweep)."""
        with self._room_for_python():
            if d.background:
                self.con.from_arrow(d.build(self, self.ask)).create(d.name)
            else:
                d.build(self)

    @contextlib.contextmanager
    def _room_for_python(self):
        import duckdb

        from . import memory
        if getattr(self, "database", ":memory:") == ":memory:":
            yield   # in memory a builder runs beside the SQL objects within cap + its share (README)
            return
        full = self.duckdb_bytes
        low = min(full, int(self.cap_bytes * (1 - memory.BUILDER_SHARE)))
        try:
            self.con.execute(f"SET memory_limit = '{low // 10**6}MB'")   # our own numbers, not input
        except duckdb.Error:   # DuckDB could not evict enough: run under the full cap
            low = None
        try:
            yield
        finally:
            if low is not None:
                self.con.execute(f"SET memory_limit = '{full // 10**6}MB'")

    def _start(self, d) -> None:
        """Start background builder ``d`` on a cursor of its own; what it reads stays where
        it is (never moved out of memory, see _compact) until it is done."""
        from concurrent.futures import ThreadPoolExecutor
        if self._bg_pool is None:
            self._bg_pool = ThreadPoolExecutor(1, thread_name_prefix="kvtrace-derive")
        cur = self.con.cursor()
        ask = lambda name, params=None, batches=None: self.ask(name, params, cursor=cur, batches=batches)  # noqa: E731
        self._pending[d.name] = (self._bg_pool.submit(d.build, self, ask), cur, d.requires)

    def _await(self, names: list[str]) -> None:
        """Wait for these background builders and create their tables (in order; the
        first failure is raised once all have stopped, none is left running)."""
        error = None
        for name in names:
            fut, cur, _ = self._pending[name]
            try:
                table = fut.result()
            except BaseException as e:   # noqa: BLE001 -- re-raised below, after the others
                error = error or e
                table = None
            finally:
                cur.close()
                del self._pending[name]
            if table is not None and error is None:
                self.con.from_arrow(table).create(name)
                self._done(name)
        if error is not None:
            raise error

    def _write_out(self, store, d, runs: list | None = None) -> bool:
        """Past the memory share, a SQL table is written straight from its query to its
        saved file (persist.Store.write) instead of being built in memory and moved out
        (``runs``: the parameters of each piece, see _piece_params)."""
        import duckdb

        from .registry import table_query
        query = table_query(d)
        try:
            return query is not None and store.write(self.con, d.name, query, runs)
        except duckdb.OutOfRangeException as e:
            raise out_of_range(e) from e

    def create_sql(self, d, con=None) -> None:
        """Create SQL object ``d`` through ``con`` (default: the model's connection; a
        cursor of its own when objects build in parallel), in pieces where it is declared so."""
        self._create_sql(d, self._piece_params(d, con), con)

    def _piece_params(self, d, con=None) -> list | None:
        """The parameters of each piece SQL object ``d`` is built in (None: it takes none).

        A table declared in pieces (Derived.piece_key) is built from ranges of a key column
        ($lo <= key < $hi): in one piece (both null) unless the rows of the tables it names,
        its hash joins' build sides (the share of them its header declares), outgrow
        memory.PIECE_SHARE of the cap (queries/table_bytes.sql sizes them). One statement would then spill them and every
        probe row with all its columns; in as many ranges of equal row counts as keep each
        piece's share within it, nothing spills."""
        if d.piece_key is None:
            return None
        from . import memory
        con = con if con is not None else self.con
        need = sum(con.execute(query_sql("table_bytes"), {"t": t}).fetchall()[0][0] or 0 for t in d.pieces)
        n = memory.piece_count(need / d.pieces_divisor, self.cap_bytes)
        cuts: list = []
        if n > 1:
            table, column = d.piece_key
            q = [k / n for k in range(1, n)]
            found = con.execute(query_sql("piece_bounds"), {"t": table, "c": column, "q": q}).fetchall()[0][0]
            cuts = sorted({v for v in found or [] if v is not None})
        edges = [None, *cuts, None]
        return [{"lo": lo, "hi": hi} for lo, hi in zip(edges, edges[1:])]

    def _create_sql(self, d, runs: list | None, con=None) -> None:
        """Create SQL object ``d`` in the database: its statement, then (a table built in
        pieces) each further piece's rows inserted."""
        import duckdb
        con = con if con is not None else self.con
        try:
            if runs is None:
                con.execute(d.sql)
                return
            from .registry import table_query
            con.execute(d.sql, runs[0])
            insert = f'INSERT INTO "{d.name}" ' + table_query(d)   # a registry name and its own SQL, never input
            for p in runs[1:]:
                con.execute(insert, p)
        except duckdb.OutOfRangeException as e:
            raise out_of_range(e) from e

    def save_derived(self) -> None:
        """Write the derived tables built since the last call beside the index, for the
        next model of this trace (persist.py). close() does it: a command's output comes
        first, and its next run reads them instead of deriving."""
        store = getattr(self, "_store", None)
        if store is not None and self._unsaved:
            # one table per DuckDB thread at once: each Parquet write runs on one core
            from concurrent.futures import ThreadPoolExecutor
            threads = int(self.con.execute("SELECT current_setting('threads')").fetchall()[0][0])
            with ThreadPoolExecutor(max(1, min(threads, 4))) as pool:
                list(pool.map(lambda name: self._save_one(store, name), self._unsaved))
        self._unsaved = []

    def _save_one(self, store, name: str) -> None:
        cur = self.con.cursor()
        try:
            store.save(cur, name)
        finally:
            cur.close()

    def _compact(self) -> None:
        """Once the derived tables' rows hold COMPACT_SHARE of the memory cap (memory.py):
        move them out of memory into their saved files (persist.py; later steps read them
        from there, out of core, and the next model of the trace reuses them), and
        compress whatever could not be moved (DuckDB compresses in-memory tables only at a
        CHECKPOINT, ~30% more derive CPU, so small traces, far below the cap, pay neither)."""
        store = getattr(self, "_store", None)
        if getattr(self, "database", ":memory:") != ":memory:" and store is not None and self._unsaved:
            # out of core (a database file): every table leaves it for its Parquet
            # file as soon as it is built, so the disk holds each table once and smaller
            # than in DuckDB's own storage (100M events: desc_end alone took 8 GB of the
            # database file); the CHECKPOINT frees the dropped tables' blocks for the next
            self._unsaved = [n for n in self._unsaved if n in self._pinned() or not store.move_out(self.con, n)]
            self._past_share = store.enabled   # from now on SQL tables go straight to their files
            self._checkpoint()
            return
        used = self.con.execute(query_sql("table_memory")).fetchall()[0][0]
        if used <= self._compact_at:
            return
        if store is not None and self._unsaved:
            kept = []
            for name in self._unsaved:
                if name in self._pinned() or not store.move_out(self.con, name):
                    kept.append(name)
            self._unsaved = kept
            # from now on SQL tables go straight to their files (derive: _write_out)
            self._past_share = store.enabled
            used = self.con.execute(query_sql("table_memory")).fetchall()[0][0]
        if used > self._compact_at:
            self._checkpoint()

    def _pinned(self) -> set[str]:
        """Tables a background builder reads: moving one out (drop, then a view over its
        file) under its running query would fail it."""
        return {r for _, _, reqs in getattr(self, "_pending", {}).values() for r in reqs}

    def _checkpoint(self) -> None:
        import duckdb
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.TransactionException:
            # another cursor holds a write transaction (the viewer's, while this
            # derive runs in its background): compressing waits for the next step
            pass

    def table(self, name: str) -> pa.Table:
        """A derived object's rows as an Arrow table (built first if needed)."""
        self.derive([name])
        return self.con.table(name).to_arrow_table()

    # ------------------------------------------------------------------ timeline
    def timeline_ready(self) -> bool:
        """Whether the timeline (order.py) is already written for this trace (opening it
        is then quick; the first build takes ~30 s at 10M events)."""
        from . import order
        return order.is_current(self.index_dir)

    def timeline_file(self) -> str:
        """The timeline's Parquet file (sorted by ``ord``; one row group per 8,192 events),
        built first if needed, for readers that page it by row group; SQL reads the
        ``timeline`` view."""
        from . import order
        self.derive(["timeline"])
        return order.ensure(self)

    def release_streams(self) -> None:
        """Drop the references to the raw Arrow streams once the index exists.

        Opening maps every stream file; at 10M events ~280 MB of those pages stay
        resident. Everything here reads the Parquet index through DuckDB, so the tables
        can go (the manifest, shard info and notes stay)."""
        from ..tracer.reader import LazyStream
        from ..tracer.schema import SCHEMAS
        for shard in getattr(self.trace, "shards", []):
            for name, st in shard.streams.items():
                # a stream opened from the index summary was never read: its rows stay unread
                loaded = not isinstance(st, LazyStream) or st.loaded
                st.table = st.table.schema.empty_table() if loaded else SCHEMAS[name].empty_table()

    # ------------------------------------------------------------------ capabilities
    def capabilities(self) -> dict[str, bool]:
        """What the trace's raw facts allow: descriptors, layouts, slot events (alloc/free),
        writes, reads, checksums, and whether every shard closed cleanly."""
        if self._caps is None:
            row = self.ask("capabilities").to_pylist()[0]
            # every shard closed (a ring window never is: its end is a cut), and nothing
            # missing or cut short (the reader's and the cut's notes, and any shard the
            # analysis cuts: e.g. descriptor rows missing with nothing counted lost)
            row["closed"] = (all(s.closed for s in self.trace.shards)
                             and not any(("missing" in n or "not closed" in n or "truncated" in n) for n in self.notes)
                             and not any(c.cut is not None for c in (self.cuts or {}).values()))
            self._caps = {k: bool(row[k]) for k in CAPABILITY_NAMES}
        return self._caps

    def sandbox(self) -> None:
        """Bound what SQL typed by a user can reach from now on: files under the trace's
        index only, settings locked (see sandbox.py). Build what you need first."""
        from .sandbox import sandbox
        sandbox(self.con, self.index_dir)

    def close(self, save: bool = True) -> None:
        """Save the derived tables built (unless ``save`` is false), then close."""
        from .memory import remove_spill
        try:
            pending = list(getattr(self, "_pending", {}))
            if pending:   # never close the connection under a running builder
                try:
                    self._await(pending)
                except Exception:   # noqa: BLE001 -- closing: its error was or will not be asked for
                    save = False
            if save:
                self.save_derived()
        finally:
            if getattr(self, "_bg_pool", None) is not None:
                self._bg_pool.shutdown(wait=True)
            self.con.close()
            if getattr(self, "_store", None) is not None:
                self._store.close()
        remove_spill(self.con_spill)

    def __enter__(self) -> "TraceModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close(save=exc[0] is None)   # leaving on an error: no time spent saving


def out_of_range(e: Exception) -> TraceError:
    """A value of the trace the analysis cannot compute with (a trace is untrusted input):
    the domain error the CLI prints in one line."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return TraceError(f"the trace holds a value out of range for the analysis ({first}): e.g. a descriptor or "
                      "region whose address plus length passes 2^64; `kvtrace validate` checks the trace's rows")
