"""TimelineSource: the timeline's rows (the trace model's happens-before-consistent order),
paged out of its Parquet file.

Rows are addressed by *position* in the visible (filtered) list. Without a filter the
position is the event's ``ord``; with one, the matching ords are kept as one numpy
array (8 bytes a row), so a step or a page costs one row-group read, never a scan.
"""
from __future__ import annotations

import collections
import os
import re
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kvtrace.model import follow_index
from kvtrace.model.follow_index import FollowIndex

from .filters import Filter
from .queries import sql_text

PAGE = 128
#: the columns a timeline row carries
COLUMNS = ("ord", "shard", "seq", "t_ns", "agent", "kind", "request", "pool", "layer", "slots",
           "xfer", "peer", "addr", "nbytes", "status", "msg", "detail", "pair_shard", "pair_seq", "pair_xfer")
_TIME = re.compile(r"^@?\s*([0-9.]+)\s*(ns|us|µs|ms|s)?$")
#: sql/follow_find.sql's parameters for each kind of follow_index.KEYS
_SQL_PARAMS = {"request": ("request",), "slot": ("agent", "pool", "slot"), "xfer": ("xshard", "xfer")}
_NO_KEY = {name: None for names in _SQL_PARAMS.values() for name in names}
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, None: 1_000_000_000}


class OrdReader:
    """Rows of the timeline file by position, without SQL: the file is sorted by the
    dense ``ord``, so row group k holds ords [starts[k], starts[k+1]) and a page is one
    row-group read (~3 ms at 10M events; a SQL range query spent ~60 ms pruning 1,200
    row groups). Not thread-safe: one per thread."""

    def __init__(self, path: str, cache: int = 4):
        self._pf = pq.ParquetFile(path)
        md = self._pf.metadata
        self._starts = np.cumsum([0] + [md.row_group(k).num_rows for k in range(md.num_row_groups)])
        self._cache: collections.OrderedDict[int, pa.Table] = collections.OrderedDict()
        self._size = cache

    @property
    def num_rows(self) -> int:
        return int(self._starts[-1])

    def min_of(self, column: str):
        """The smallest non-null value of ``column`` from the row groups' statistics (no
        data read); None when a row group has no statistics for it."""
        md = self._pf.metadata
        leaves = [j for j in range(md.num_columns) if md.schema.column(j).path == column]
        if not leaves:
            return None
        i = leaves[0]
        lows = []
        for k in range(md.num_row_groups):
            st = md.row_group(k).column(i).statistics
            if st is None or not st.has_min_max:
                if md.row_group(k).num_rows and (st is None or st.null_count != md.row_group(k).num_rows):
                    return None
                continue
            lows.append(st.min)
        return min(lows) if lows else None

    def _group(self, k: int) -> pa.Table:
        t = self._cache.get(k)
        if t is None:
            t = self._cache[k] = self._pf.read_row_group(k, columns=list(COLUMNS))
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return t

    def _group_of(self, o: int) -> int:
        return int(np.searchsorted(self._starts, o, side="right")) - 1

    def rows(self, a: int, b: int) -> list[dict]:
        """Events with ord in [a, b) as dicts."""
        k0, k1 = self._group_of(a), self._group_of(b - 1)
        parts = [self._group(k) for k in range(k0, k1 + 1)]
        tbl = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        return tbl.slice(a - int(self._starts[k0]), b - a).to_pylist()

    def by_ord(self, ords) -> list[dict]:
        """Events at the given ords, in that order."""
        return [self.rows(int(o), int(o) + 1)[0] for o in ords]


class TimelineSource:
    """Paged, filterable access to the ordered events of a trace model.

    Args:
        session: an open kvtrace.model.TraceModel (a TraceSession, when findings are wanted).
        sandbox: bound the session's SQL to the trace (session.sandbox()) once the timeline
            is open, before anything runs in the background: for a console typing SQL.
        background: build what the side panels read in a thread (see wait_ready, close)
            instead of before returning.
    """

    #: derived objects only the side panels and the slot filter read (end_hold: the slot
    #: map's transfers in flight, tui/sql/inflight.sql)
    PANEL_OBJECTS = ("xfer_span", "slot_history", "desc_match", "end_hold")

    def __init__(self, session, sandbox: bool = False, background: bool = False):
        self.session = session
        self.events_path = _timeline(session)
        session.release_streams()
        self.con = session.cursor()          # own cursor: workers take others
        # ``tl``: the file itself (the model's ``timeline`` view over it comes with the
        # background build below, which the panels' objects require)
        self.con.read_parquet(self.events_path).create_view("tl")
        # What the panels read (descriptor ends, holdings: most of the model's derivation,
        # tens of seconds at 10M events). In the background (`kvtrace tui`) it is built on
        # the session's own connection while the timeline already opens and steps; panels
        # wait for it (wait_ready), and so must anything else using that connection.
        if sandbox:   # before the background build touches the connection (model/sandbox.py)
            session.sandbox()
        # n/p's posting lists (kvtrace/model/follow_index.py): built once per trace, in
        # their own thread (numpy, a few seconds at 10M events) when missing, then loaded;
        # until then find() asks DuckDB (sql/follow_find.sql)
        self.follow = FollowIndex(os.path.dirname(self.events_path))
        self._follow_ready = threading.Event()
        if background:
            threading.Thread(target=self._build_follow, name="kvtrace-follow", daemon=True).start()
        else:
            self._build_follow()
        self._ready = threading.Event()
        self._derive_error: BaseException | None = None
        self._thread = threading.Thread(target=self._derive_panels, name="kvtrace-derive", daemon=True)
        if background:
            self._thread.start()
        else:
            self._derive_panels()
            self.wait_ready()
        self.reader = OrdReader(self.events_path)
        self.con.execute("CREATE OR REPLACE TEMP TABLE tui_slot_xfers (shard VARCHAR, xfer BIGINT)")
        self.con.execute("CREATE OR REPLACE TEMP TABLE tui_visible (ord BIGINT)")
        # from the file's metadata: a scan of 10M t_ns values would cost more than the rest of the open
        self.total = self.reader.num_rows
        t0 = self.reader.min_of("t_ns")
        if t0 is None:
            t0 = self.con.execute("SELECT min(t_ns) FROM tl").fetchone()[0]
        self.t0 = t0 or 0
        self.filter = Filter()
        self._ords: np.ndarray | None = None     # visible ords when filtered
        self._pages: collections.OrderedDict[int, list[dict]] = collections.OrderedDict()

    def wait_follow(self, timeout: float | None = None) -> bool:
        """Wait until n/p's posting lists are built; False if they are not (yet, or
        building them failed: n/p then keep asking DuckDB)."""
        return self._follow_ready.wait(timeout)

    def _build_follow(self) -> None:
        try:
            follow_index.ensure(self.events_path)    # at once when current
            self.follow.warm()
        except (OSError, ValueError, pa.ArrowException):   # n/p keep asking DuckDB
            return
        self._follow_ready.set()

    def _derive_panels(self) -> None:
        try:
            self.session.derive(list(self.PANEL_OBJECTS))
        except BaseException as e:   # re-raised to whoever waits (wait_ready), not lost in the thread
            self._derive_error = e
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        """Whether what the panels read is built (see wait_ready)."""
        return self._ready.is_set()

    def wait_ready(self) -> None:
        """Block until the panels' derived objects exist (call from a worker, not the UI
        thread); re-raises what building them raised. The session's own connection is
        free for this thread's use afterwards."""
        self._ready.wait()
        if self._derive_error is not None:
            raise self._derive_error

    def close(self) -> None:
        """Stop the background build if it still runs (quitting must not wait for it)."""
        if self._thread.is_alive():
            if not self._ready.is_set():
                self.session.con.interrupt()
            self._thread.join()

    # -- filtering --------------------------------------------------------------
    def set_filter(self, flt: Filter) -> int:
        """Show only rows matching ``flt``; returns the visible row count."""
        self._pages.clear()
        self.filter = flt
        if flt.empty:
            self._ords = None
            return self.total
        if flt.slot is not None and flt.agent is not None and flt.pool is not None:
            self.wait_ready()   # descriptor ends (chosen on the slot map: already built then)
            self.con.execute(sql_text("slot_xfers"), [flt.agent, flt.pool, flt.slot])
            params = flt.params(by_desc=True)
        else:
            params = flt.params()
        self.con.execute(sql_text("filter_ords"), params)
        got = self.con.execute(sql_text("visible_ords")).fetchnumpy()
        self._ords = np.asarray(got["ord"], dtype=np.int64)
        return len(self._ords)

    @property
    def filtered(self) -> bool:
        """Whether a filter hides some events."""
        return self._ords is not None

    @property
    def count(self) -> int:
        """Visible rows."""
        return self.total if self._ords is None else len(self._ords)

    # -- rows -------------------------------------------------------------------
    def row(self, pos: int) -> dict | None:
        """The visible row at ``pos`` (None outside), from a small page cache."""
        if not 0 <= pos < self.count:
            return None
        page = pos // PAGE
        rows = self._pages.get(page)
        if rows is None:
            rows = self._fetch(page * PAGE, min(self.count, (page + 1) * PAGE))
            self._pages[page] = rows
            if len(self._pages) > 32:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(page)
        return rows[pos - page * PAGE]

    def _fetch(self, a: int, b: int) -> list[dict]:
        if self._ords is None:
            return self.reader.rows(a, b)
        else:
            want = self._ords[a:b]
            tbl = self.con.execute(sql_text("page_rows"),
                                   {"lo": int(want[0]), "hi": int(want[-1]), "ords": want.tolist()})
        names = [d[0] for d in tbl.description]
        return [dict(zip(names, r)) for r in tbl.fetchall()]

    def position_of(self, ord_: int) -> int:
        """The visible position of ``ord_``, or of the first visible row after it."""
        if self._ords is None:
            return max(0, min(int(ord_), self.total - 1))
        return min(int(np.searchsorted(self._ords, ord_)), max(0, len(self._ords) - 1))

    # -- searching --------------------------------------------------------------
    def find(self, follow: tuple[str, tuple], after: int, forward: bool = True) -> int | None:
        """The ord of the next (previous) visible event after ``after`` that shares what
        ``follow`` (follow.follow_predicate's (kind, key)) names: a lookup in the
        timeline's posting lists (kvtrace/model/follow_index.py); DuckDB answers until
        those are built (sql/follow_find.sql, the same question)."""
        kind, key = follow
        if self._follow_ready.is_set():
            return self.follow.find(kind, key, after, forward, self._ords)
        # the posting lists are still being built: the same question to DuckDB
        params = dict(zip(_SQL_PARAMS[kind], key))
        r = self.con.execute(sql_text("follow_find"), dict(_NO_KEY, **params, after=int(after), forward=bool(forward),
                                                           filtered=self._ords is not None)).fetchone()
        return None if r[0] is None else int(r[0])

    def ord_of(self, shard: str | None, seq: int) -> int | None:
        """The ord of event ``seq`` of ``shard`` (any shard when None: the first)."""
        if shard:
            r = self.con.execute("SELECT min(ord) FROM tl WHERE shard = ? AND seq = ?", [shard, seq]).fetchone()
        else:
            r = self.con.execute("SELECT min(ord) FROM tl WHERE seq = ?", [seq]).fetchone()
        return None if r[0] is None else int(r[0])

    def ord_at_time(self, offset_ns: int) -> int | None:
        """The first event (in timeline order) at or after ``offset_ns`` from the trace start."""
        r = self.con.execute("SELECT min(ord) FROM tl WHERE t_ns >= ?", [self.t0 + int(offset_ns)]).fetchone()
        return None if r[0] is None else int(r[0])

    def resolve_jump(self, text: str) -> int | None:
        """Parse a jump target: ``123`` (row), ``shard:seq``, ``seq 12``, ``@1.5ms`` (time)."""
        text = text.strip()
        if not text:
            return None
        if text.startswith("@") or text.startswith("t="):
            m = _TIME.match(text.removeprefix("t="))
            if not m:
                raise ValueError(f"jump: cannot read time {text!r} (e.g. @1.5ms, @200us, @2s)")
            return self.ord_at_time(int(float(m.group(1)) * _UNITS[m.group(2)]))
        if text.startswith("seq"):
            return self.ord_of(None, _int(text[3:]))
        if ":" in text:
            shard, _, seq = text.rpartition(":")
            return self.ord_of(shard, _int(seq))
        return _int(text)


def _timeline(session) -> str:
    """The timeline file. Once it is current, opening derives nothing (building it the
    first time needs the model's cross-shard pairs, see order.py)."""
    from kvtrace.model import order

    return order.ensure(session) if session.timeline_ready() else session.timeline_file()


def _int(s: str) -> int:
    try:
        return int(s.strip())
    except ValueError:
        raise ValueError(f"jump: {s.strip()!r} is not a number (row, shard:seq, seq N or @time)") from None
