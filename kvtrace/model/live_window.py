"""A bounded analysis window for a trace being followed (``kvtrace watch --window``).

A watcher that re-checks the whole trace on every flush pays for the whole recording on
every re-check: after an hour of a busy engine a re-check takes minutes, and a finding
prints long after its facts landed. With a window, the live model holds only the recent
past plus what it still refers to, so a re-check costs what the window holds, not what
the recording has grown to.

What to keep is the flight recorder's question (tracer/ring_store.py answers it, and is
the one place that does): the events of the last ``window`` seconds, plus every event of
an owner that is still live -- an open request, the generation of a slot still held, a
transfer not yet completed, registered memory -- and of what such owners shared a slot
generation with; the prepared lists and layouts always. A ring dump built by those rules
checks with no false finding at its start; the watcher's window is the same dump, taken
continuously. Every shard gets one store; the stores tell each other the requests they
keep live, so a request is kept with both its ends or with neither, as the ring's shards
do through the session directory.

The stores see every row the watcher loads (their bookkeeping is what the ring records
with), but evict only every half window, all at one start and cut: the live tables then
delete what the window let go, so between evictions a re-check only appends.

A window needs the shards' clocks to be comparable with each other and with now (this
host's monotonic clock, ``shard.json`` ``clock``, as the live frontier does): with other
clocks nothing is evicted and the whole trace is analysed.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..tracer.ring_store import RingStore
from ..tracer.schema import SCHEMAS

#: the order a recorder flushes its tables in: what an event refers to comes first
FEED_ORDER = ("layouts", "dlists", "descs", "events")
#: the longest stretch of one shard's events the store takes as one chunk (a chunk is kept or
#: evicted whole; shards' chunks must not span more than a fraction of the slack, or one
#: shard could keep a request the other let go: a quarter of the slack, at most this)
PIECE_NS = 250_000_000


def _batches(rows: pa.Table | None, table: str) -> list[pa.RecordBatch]:
    if rows is None or not len(rows):
        return []
    return [b for b in rows.select(SCHEMAS[table].names).to_batches() if b.num_rows]


def _descs_by_piece(waiting: list[pa.RecordBatch], events: pa.Table, pieces: list[pa.Table]):
    """The descriptor rows ``waiting`` split by the piece of ``events`` holding their
    posting (the first ``xfer_post`` of their xfer): ({piece index: rows}, the rows whose
    posting is not in ``events`` or None)."""
    if not waiting:
        return {}, None
    descs = pa.Table.from_batches(waiting)
    starts = np.cumsum([0] + [len(p) for p in pieces])
    is_post = pc.fill_null(pc.equal(events.column("kind"), "xfer_post"), False)
    post_rows = np.flatnonzero(is_post.to_numpy(zero_copy_only=False))
    post_xfer = pc.take(events.column("xfer"), pa.array(post_rows, pa.int64()))
    piece_of_xfer: dict = {}
    for row, x in zip(post_rows.tolist(), post_xfer.to_pylist()):
        if x is not None and x not in piece_of_xfer:   # the first post of each xfer
            piece_of_xfer[x] = int(np.searchsorted(starts, row, side="right")) - 1
    piece = np.array([piece_of_xfer.get(x, -1) for x in descs.column("xfer").to_pylist()], dtype=np.int64)
    order = np.argsort(piece, kind="stable")          # stream order within a piece
    out, later = {}, None
    for rows_ix in np.split(order, np.flatnonzero(np.diff(piece[order])) + 1):
        if not len(rows_ix):
            continue
        rows = descs.take(pa.array(rows_ix, pa.int64()))
        p = int(piece[rows_ix[0]])
        if p < 0:
            later = rows
        else:
            out[p] = rows
    return out, later


def _time_pieces(events: pa.Table, span_ns: int) -> list[pa.Table]:
    """``events`` (stream order) cut where their time crosses into the next ``span_ns``
    (times taken as the running maximum: a stream's timestamps can step back a little)."""
    t = events.column("t_ns").to_numpy(zero_copy_only=False)
    if len(t) == 0 or np.isnan(t.astype(float)).any():
        return [events]
    t = np.maximum.accumulate(t.astype(np.int64))
    bucket = (t - t[0]) // span_ns
    cuts = np.flatnonzero(np.diff(bucket)) + 1
    bounds = [0, *cuts.tolist(), len(t)]
    return [events.slice(a, b - a) for a, b in zip(bounds, bounds[1:])]


class LiveWindow:
    """Per shard, a RingStore of what a window of ``window_s`` seconds keeps.

    Args:
        window_s: how much recent past to keep, in seconds (> 0).
        slack_s: how long an owner is kept after it stopped being live. The ring's shards
            evict on their own, in their own processes, and keep 5 s; here every store moves
            at the same instant with the others' live requests just exchanged, so the slack
            only has to cover a piece (PIECE_NS) and timestamps a little out of order.
    """

    def __init__(self, window_s: float, slack_s: float = 1.0):
        if not window_s > 0:
            raise ValueError("a window must be longer than 0 s")
        self.window_ns = int(window_s * 1e9)
        self.slack_ns = int(slack_s * 1e9)
        self.piece_ns = max(1, min(PIECE_NS, self.slack_ns // 4))
        self.stores: dict[str, RingStore] = {}
        self._waiting: dict[str, list[pa.RecordBatch]] = {}   # descriptor rows before their posting
        self.evictions = 0          #: how many times the window moved (live tables rebuilt)
        self.fed_events = 0         #: events handed to the stores
        self.kept_events = 0        #: events the window held when it last moved

    def _store(self, shard: str) -> RingStore:
        st = self.stores.get(shard)
        if st is None:
            st = self.stores[shard] = RingStore(window_ns=self.window_ns, slack_ns=self.slack_ns)
        return st

    def feed(self, shard: str, rows: dict[str, pa.Table]) -> None:
        """Hand the store of ``shard`` the rows its streams gained in one load (per table).

        The store expects what a recorder flushes: a posting's descriptor rows at most one
        flush before its ``xfer_post``, and flushes a fraction of a second long. A load can
        hold many flushes (the first load, a slow re-check), so its events go in pieces of
        at most PIECE_NS, each after the descriptor rows of the postings it holds; rows of
        postings not loaded yet wait here for theirs."""
        st = self._store(shard)
        for t in ("layouts", "dlists"):
            for b in _batches(rows.get(t), t):
                st.add(t, b)
        waiting = self._waiting.pop(shard, []) + _batches(rows.get("descs"), "descs")
        events = rows.get("events")
        if events is None or not len(events):
            if waiting:
                self._waiting[shard] = waiting
            return
        events = events.select(SCHEMAS["events"].names).combine_chunks()
        pieces = _time_pieces(events, self.piece_ns)
        by_piece, later = _descs_by_piece(waiting, events, pieces)
        if later is not None:
            self._waiting[shard] = [b for b in later.to_batches() if b.num_rows]
        for i, piece in enumerate(pieces):
            d = by_piece.get(i)
            if d is not None:
                for b in d.to_batches():
                    st.add("descs", b)
            for b in piece.to_batches():
                if b.num_rows:
                    st.add("events", b)
                    self.fed_events += b.num_rows

    def waiting(self, shard: str) -> list[pa.RecordBatch]:
        """Descriptor rows of ``shard`` whose posting was not loaded yet (not in the store)."""
        return list(self._waiting.get(shard, []))

    def forget(self, shard: str) -> None:
        """A shard removed (or rewritten shorter): its rows are loaded again from scratch."""
        st = self.stores.pop(shard, None)
        self._waiting.pop(shard, None)
        if st is not None:
            st.close()

    def due(self, now_ns: int) -> bool:
        """Some shard holds rows older than one and a half windows: time to move the window."""
        edge = now_ns - self.window_ns - self.window_ns // 2
        return any(st.chunks and st.chunks[0].t_last < edge for st in self.stores.values())

    def advance(self, now_ns: int) -> dict[str, dict[str, list[pa.RecordBatch]]]:
        """Move every shard's window to end at ``now_ns``; returns per shard the rows it
        keeps, per table (to rebuild the live tables from)."""
        self._exchange_live(now_ns)
        # One start for every shard, so they keep a request exactly when the others do: the
        # latest of the oldest chunks they will keep, as a ring dump's window starts; and
        # one cut, a slack before it, for what eviction and the snapshot let go (a store on
        # its own cuts before its own oldest chunk, and a quiet shard's is later than the
        # others', or it has none)
        edge = now_ns - self.window_ns
        firsts = [next((c.t_first for c in st.chunks if c.t_last >= edge), None) for st in self.stores.values()]
        start = max([edge] + [t for t in firsts if t is not None])
        for st in self.stores.values():
            st.evict(now_ns, cut_ns=start - self.slack_ns)
        out = {}
        for name, st in self.stores.items():
            batches, _ = st.snapshot(start)
            out[name] = {t: [b for b in batches[t] if b is not None and b.num_rows] for t in FEED_ORDER}
        self.evictions += 1
        self.kept_events = sum(b.num_rows for tables in out.values() for b in tables["events"])
        return out

    @property
    def evicted_events(self) -> int:
        """Events the window left behind so far (all of them analysed before)."""
        return self.fed_events - self.kept_events if self.evictions else 0

    def _exchange_live(self, now_ns: int) -> None:
        """Every store keeps a request exactly when the others do: each learns, as the ring's
        shards do through the session directory, the requests the others keep live, when
        they let the rest go, and which requests they saw depend on which (decode sees a
        request read a prefix-cache page another filled; prefill never does). Repeated until
        no store's view changes: a time learnt from one shard can lengthen a dependency on another
        (measured: a single round kept a request on decode that prefill had let go)."""
        before = None
        for _ in range(16):
            views = {name: (st.live_requests(), st.depends()) for name, st in self.stores.items()}
            if views == before:
                return
            before = views
            for name, st in self.stores.items():
                live, last, depends = set(), {}, []
                for other, ((o_live, o_last), o_depends) in views.items():
                    if other == name:
                        continue
                    live.update(o_live)
                    depends += o_depends
                    for req, t in o_last.items():
                        if t > last.get(req, -1):
                            last[req] = t
                st.set_remote(live, last, now_ns, depends)

    def close(self) -> None:
        for st in self.stores.values():
            st.close()
        self.stores = {}

