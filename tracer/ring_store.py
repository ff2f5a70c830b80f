"""The flight recorder's memory: a bounded ring of flushed batches, plus what outlives it.

A :class:`RingStore` receives every record batch a Recorder would have written (descs,
dlists and layouts before the events that reference them). The batches of one flush form
a *chunk*; chunks leave oldest first once the ring is over its byte size or older than
its duration.

Eviction must not leave a dumped window whose events point at facts that are gone, or
``check`` would report false hazards at the window's start. So some facts are *pinned*
(kept outside the ring's eviction):

* layouts and prepared descriptor lists, always (small, referenced by index);
* every event of an *owner* that is still live. An owner is a request, or, for NIXL
  facts recorded without one, the transfer (its post, descriptors and completion) or the
  registered region (register/deregister). An owner is live while
    - it is between ``req_start`` and ``req_done``/``req_abort`` on this shard;
    - it holds a slot this shard manages (allocated and not yet freed);
    - it started a generation of a slot that is still held (allocated the slot when it
      came from free): its alloc, writes and transfers say what the slot holds -- a prefix
      page shared by later turns keeps the turn that filled it until its last holder frees
      the slot;
    - it posted a transfer not yet completed;
    - it is registered memory not yet deregistered;
* and an owner stays ``slack_ns`` past the moment it stopped being live, so that two
  shards evicting on their own keep both ends of what they share;
* and a request another shard of the session keeps live (each shard publishes its live
  requests beside its registration, ``ring.py``): a request is dumped with both its ends
  or with neither.

Owners are kept whole: every event of a request or none of them, never half a request; and
an owner that joined a slot generation another one started (a turn reading a prefix page
the cache passed on) *depends* on that owner: whatever keeps it keeps the owner it depends
on, and that one's own dependencies, for as long (not the other way round: a page shared by
every request, a system prompt's, keeps the request that filled it and the requests kept
for themselves, not every request that ever read it -- with "kept together" both ways, one
such page kept every request of the run).
What pinning cannot keep (pinned facts over half the ring's size) is dropped and the
loss is reported by :meth:`RingStore.window` (``state_complete: false``).

Memory. Every batch the ring holds is kept *packed* (:class:`Packed`): one LZ4-compressed
Arrow IPC message in one exact-size allocation, not the Arrow arrays the Recorder built.
Arrays built row by row sit in buffers grown by doubling (an allocator keeps a block it
shrinks in place), each with its own C++ objects, scattered among short-lived allocations:
measured, the process grew by about twice the Arrow bytes it held (bench/bench_ring.py).
The ring's size counts, per batch, the larger of its Arrow bytes (what a dump writes) and
its packed bytes, plus the bookkeeping per distinct owner of each batch (:data:`OWNER_BYTES`).
Its budget (``ring_budget.RingBudget``, SIZE per process) is also charged with what the
store needs beside its batches (:attr:`RingStore.working_bytes`: the liveness bookkeeping
it still keeps and twice its largest batch), so the batches get what is left.
"""
from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .recorder import NATIVE_ROWS, np_arrow
from .ring_budget import RingBudget
from .schema import EVENTS, EventKind as K

_XFER_KINDS = frozenset({K.XFER_POST.value, K.XFER_DONE.value, K.XFER_ERROR.value, K.XFER_RELEASE.value})
_REG_KINDS = frozenset({K.REGISTER.value, K.DEREGISTER.value})
_COLS = ("seq", "t_ns", "agent", "kind", "request", "pool", "slots", "xfer", "addr", "detail")
#: kinds that change what is live (the bookkeeping looks at these rows only)
_STATE_KINDS = _XFER_KINDS | _REG_KINDS | frozenset({K.ALLOC.value, K.FREE.value, K.REQ_START.value,
                                                     K.REQ_DONE.value, K.REQ_ABORT.value})
_STATE_KIND_SET = pa.array(sorted(_STATE_KINDS), pa.string())
_BOOK_COLS = ("t_ns", "agent", "kind", "request", "pool", "xfer", "addr", "slots")   # what it reads
_XFER_END = frozenset({K.XFER_DONE.value, K.XFER_ERROR.value, K.XFER_RELEASE.value})
_T, _AGENT, _KIND, _REQUEST, _POOL_C, _SLOTS, _XFER, _ADDR = (
    EVENTS.names.index(c) for c in ("t_ns", "agent", "kind", "request", "pool", "slots", "xfer", "addr"))
_PICK_COLS = (_T, _AGENT, _KIND, _REQUEST, _POOL_C, _XFER, _ADDR, _SLOTS)
#: the bookkeeping's row selection in C (tracer/_rows.c: pick), unless the recorder's rows are
#: converted in Python (no extension, or KVTRACE_ROWS=python): both give the same lists
_PICK = None if NATIVE_ROWS is None else NATIVE_ROWS.pick
_BOOK_LOOP = None if NATIVE_ROWS is None else NATIVE_ROWS.book
#: rows per call of that loop (~0.2-0.5 ms each)
_BOOK_SLICE = 128
#: the kinds the bookkeeping reads, as numbered in tracer/_rows.c (K_ALLOC...)
_KIND_CODE = {k: i + 1 for i, k in enumerate(
    ("alloc", "free", "xfer_post", "xfer_done", "xfer_error", "xfer_release", "register", "deregister",
     "req_start", "req_done", "req_abort"))}
assert set(_KIND_CODE) == _STATE_KINDS


def _seq(v):
    """A row's slots as a list or tuple of ints (None stays None)."""
    if v is None or type(v) is tuple or type(v) is list:
        return v
    return v.tolist() if hasattr(v, "tolist") else list(v)


@dataclasses.dataclass
class _Chunk:
    """The batches of one flush (packed): descriptors first, then the events referencing them."""
    descs: list           # of Packed
    events: "Packed | None"
    owners: "Owners"      # per event row: its owner key (None: not pinnable)
    desc_owners: list     # per descs batch: its rows' Owners
    t_first: int
    t_last: int
    nbytes: int
    seq0: int | None = None   # the first event's seq


class RingStore:
    """Bounded in-memory store of one shard's flushed batches.

    Args:
        max_bytes: a budget of its own: keep at most this many bytes of batches and working
            bytes (None: no size bound, unless ``budget``).
        window_ns: keep chunks whose last event is at most this old (None: no time bound).
        slack_ns: how long an owner stays pinned after it stopped being live.
        budget: the process's budget this store shares (``ring_budget.RingBudget``, with its
            reserves); the store keeps its batches within ``budget.allowance(self)``.
    """

    def __init__(self, max_bytes: int | None = None, window_ns: int | None = None,
                 slack_ns: int = 5_000_000_000, budget: "RingBudget | None" = None):
        if max_bytes is None and window_ns is None and budget is None:
            raise ValueError("a ring needs a size or a duration")
        if budget is None and max_bytes is not None:
            budget = RingBudget(max_bytes, process_reserve=0, shard_reserve=0)
        self.budget = budget
        self.max_bytes = None if budget is None else budget.size
        self.window_ns, self.slack_ns = window_ns, slack_ns
        self._batch_peak = 0                # the largest batch held or being taken (Arrow bytes): working_bytes
        self.overflow_events = 0            # events of flushes larger than the whole allowance
        self._book_step = 0                 # the most one flush grew the bookkeeping (room kept for the next)
        self.chunks: collections.deque[_Chunk] = collections.deque()
        self._descs: list = []              # descs batches of the flush in progress
        self._carried: list = []            # descs batches already carried over once
        self.dlists: list = []
        self.layouts: list = []
        self.pinned: list = []              # (events batch, its rows' owners, their set)
        self.pinned_descs: list = []        # (descs batch, its rows' owners, their set)
        self.evicted_events = 0
        self.chunks_dropped = 0             # chunks that left the ring (the recorder resets it)
        self.state_complete = True
        self._chunk_bytes = 0               # running totals behind nbytes
        self._pinned_total = 0
        self._pending_bytes = 0
        self.on_error = None                # called with the row of an xfer_error (auto trigger)
        # liveness bookkeeping (see module docstring); sized by live slots/requests, not history
        self._open: set = set()             # requests between start and done/abort
        self._refs: dict = {}               # owner -> references that keep it live
        self._last_t: dict = {}             # owner -> last event time, or when it stopped being live
        # (agent, pool) -> {slot: the owner that founded its generation when that owner alone
        # holds it, once (most slots: no container per slot); else [founder, {holder: holds}]}
        self._slots: dict = {}
        self._inflight: dict = {}           # xfer -> owner
        self._xfer_owner: dict = {}         # xfer -> owner, for its descriptor rows
        self._remote: frozenset = frozenset()  # requests other shards of the session hold live
        self._deps: dict = {}               # owner -> owners whose slot generations it joined
        self._remote_deps: dict = {}        # request -> requests another shard saw it depend on
        if budget is not None:
            budget.join(self)

    # ------------------------------------------------------------ sizes
    def _pinned_bytes(self) -> int:
        return (sum(e[0].nbytes + e[1].nbytes for e in self.pinned)
                + sum(e[0].nbytes + e[1].nbytes for e in self.pinned_descs)
                + sum(b.nbytes for b in self.dlists) + sum(b.nbytes for b in self.layouts))

    @property
    def book_bytes(self) -> int:
        """The liveness bookkeeping's memory, estimated per entry (it is kept after the rows
        of its owners left: the requests, transfers and slots of the last slack seconds)."""
        generations = sum(map(len, self._slots.values()))
        # a slot's holders past its founder (a prefix-cache page many requests share): each
        # holds one reference beside the founder's one per generation; the other references
        # are in-flight transfers' (one each) and registrations' (counted here too: a bound)
        joiners = max(0, sum(self._refs.values()) - len(self._inflight) - generations)
        return (_BOOK["last_t"] * len(self._last_t) + _BOOK["xfer"] * len(self._xfer_owner)
                + _BOOK["deps"] * len(self._deps)
                + _BOOK["slot"] * generations + _BOOK["holder"] * joiners
                + _BOOK["small"] * (len(self._open) + len(self._refs) + len(self._inflight) + len(self._remote)))

    @property
    def working_bytes(self) -> int:
        """What the store costs beside its batches: its bookkeeping, and twice its largest
        batch (one batch unpacked and its filtered copy while evicting or dumping; a batch's
        IPC stream and its compressed copy while packing), plus room for what the next flush
        adds to the bookkeeping before it can evict (the most one flush added so far)."""
        return self.book_bytes + 2 * self._batch_peak + self._book_step

    def allowance(self) -> int | None:
        """Bytes of batches the store may hold now (None: no size bound)."""
        return None if self.budget is None else self.budget.allowance(self)

    def close(self) -> None:
        """Leave the process's budget (the store holds nothing any more)."""
        if self.budget is not None:
            self.budget.leave(self)

    @property
    def nbytes(self) -> int:
        """Bytes held: ring chunks, pinned facts and the flush in progress (kept as running
        totals, so any thread may read it while the flush thread works)."""
        return self._chunk_bytes + self._pinned_total + self._pending_bytes

    # ------------------------------------------------------------ ingest
    def add(self, name: str, batch: pa.RecordBatch, rows: list | None = None) -> None:
        """Take one batch as the Recorder flushes it (events close the current chunk).
        ``rows``: for events, the row tuples the batch was built from (EVENTS order), if
        the caller has them: the bookkeeping reads those instead of the batch's columns."""
        if name == "dlists":
            self.dlists.append(batch)
            self._pinned_total += batch.nbytes
        elif name == "layouts":
            self.layouts.append(batch)
            self._pinned_total += batch.nbytes
        elif name == "descs":
            self._batch_peak = max(self._batch_peak, batch.nbytes)
            self._descs.append(batch)
            self._pending_bytes += batch.nbytes
        elif name == "events":
            self._close_chunk(batch, rows)

    def _close_chunk(self, events: pa.RecordBatch, rows: list | None = None) -> None:
        self._batch_peak = max(self._batch_peak, events.nbytes)
        book = self.book_bytes
        owners = self._ingest_events(events, rows)  # registers transfer owners before their descs
        self._book_step = max(self._book_step, self.book_bytes - book)
        # a posting's descriptors can be flushed one flush before its xfer_post: those wait
        # (once) for the chunk that names their owner
        waiting, descs, self._descs = self._descs, [], []
        carried = {id(b) for b in self._carried}
        for b in waiting:
            if id(b) in carried or all(map(self._xfer_owner.__contains__,
                                           pc.unique(b.column("xfer"), memory_pool=_POOL).to_pylist())):
                descs.append(b)
            else:
                self._descs.append(b)
        self._carried = list(self._descs)
        desc_owners = [self._ingest_descs(b) for b in descs]
        t = events.column("t_ns")
        t_first, t_last = (t[0].as_py(), t[-1].as_py()) if len(t) else (0, 0)
        seq0 = events.column("seq")[0].as_py() if len(t) else None
        events, descs = Packed(events), [Packed(b) for b in descs]
        nbytes = (events.nbytes + owners.nbytes + sum(b.nbytes for b in descs)
                  + sum(o.nbytes for o in desc_owners))
        self._pending_bytes = sum(b.nbytes for b in self._descs)
        if self.budget is not None:     # make room first: the bound holds after every flush
            self._evict_while(lambda: self.nbytes + nbytes > self.allowance(), t_first)
            if self.nbytes + nbytes > self.allowance() and not self.chunks:
                # nothing left to evict: the window's start is cut already (or is about to
                # be), so what was kept only to pin finished owners' rows is forgotten
                self.evicted_events += sum(e[0].num_rows for e in self.pinned)
                self.pinned, self.pinned_descs = [], []
                self.state_complete = False
                self._refilter(_NEVER)
                self._pinned_total = self._pinned_bytes()
            if self.nbytes + nbytes > self.allowance():
                # one flush larger than all the room the budget leaves (a burst on a small
                # ring): it is dropped, like an eviction, and the window start is a plain cut
                self.evicted_events += events.num_rows
                self.overflow_events += events.num_rows
                self.state_complete = False
                self._batch_peak = self._held_peak()
                return
        self.chunks.append(_Chunk(descs, events, owners, desc_owners, t_first, t_last, nbytes, seq0))
        self._chunk_bytes += nbytes

    def _ref(self, owner, n: int = 1) -> None:
        self._refs[owner] = self._refs.get(owner, 0) + n

    def _unref(self, owner, t: int, n: int = 1) -> None:
        refs = self._refs
        left = refs.get(owner, 0) - n
        if left <= 0:
            refs.pop(owner, None)
        else:
            refs[owner] = left
        if t > self._last_t.get(owner, -1):
            self._last_t[owner] = t

    def _ingest_events(self, batch: pa.RecordBatch, rows: list | None = None) -> "Owners":
        # Cost: the owner of each row comes from Arrow's dictionary encoding of the request
        # column (no Python object per row); the columns the bookkeeping reads are converted
        # (one C++ pass per column) only for the rows whose kind changes liveness (allocs,
        # frees, transfer and lifecycle events), and the slot lists as one flat list sliced
        # per row. The per-row work is one loop with the state updates inlined (measured,
        # bench_ring.py [ingest]: the function calls, Counter objects and per-slot
        # reference counts of the straightforward version were most of its cost).
        # ``rows``: the Recorder's own row tuples of this batch (EVENTS order), when it has
        # them: the columns are then read from them, not converted back out of Arrow.
        own = Owners.encode(batch.column("request"))
        if rows is not None and _PICK is not None and type(rows) is list:   # the same lists, in one C pass
            idx, (ts, agents, kinds_, reqs, pools, xfers, addrs, _), slot_lists = _PICK(
                rows, _KIND, _STATE_KINDS, _PICK_COLS, _seq)
        elif rows is not None:
            idx = [i for i, r in enumerate(rows) if r[_KIND] in _STATE_KINDS]
            sel = [rows[i] for i in idx]
            ts, agents, kinds_, reqs, pools, xfers, addrs = (
                [r[c] for r in sel] for c in (_T, _AGENT, _KIND, _REQUEST, _POOL_C, _XFER, _ADDR))
            slot_lists = [_seq(r[_SLOTS]) for r in sel]
        else:
            kinds = batch.column("kind")
            mask = pc.is_in(kinds, value_set=_STATE_KIND_SET, memory_pool=_POOL)
            idx = np.flatnonzero(mask.to_numpy(zero_copy_only=False)) if pc.any(mask).as_py() else ()
        if rows is None and len(idx):
            sub = pc.take(batch.select(_BOOK_COLS), np_arrow(idx, pa.int64()), memory_pool=_POOL)
            ts, agents, kinds_, reqs, pools, xfers, addrs = (
                sub.column(c).to_pylist() for c in ("t_ns", "agent", "kind", "request", "pool", "xfer", "addr"))
            slots = sub.column("slots")
            if isinstance(slots, pa.ChunkedArray):
                slots = slots.combine_chunks()
            flat = slots.flatten().to_pylist()
            offs = slots.offsets.to_pylist()
            valid = slots.is_valid().to_pylist() if slots.null_count else None
            slot_lists = [flat[a:b] if valid is None or valid[j] else None
                          for j, (a, b) in enumerate(zip(offs, offs[1:]))]
        if len(idx) and _BOOK_LOOP is not None and type(idx) is list:
            # the loop below in C (tracer/_rows.c: book), on the same lists and state
            own._pos = {o: j for j, o in enumerate(own.uniq)}
            state = (self._refs, self._last_t, self._open, self._inflight, self._xfer_owner, self._slots, self._deps)
            lists = (ts, agents, kinds_, reqs, pools, xfers, addrs, slot_lists, idx)
            errors = []
            # in slices: the engine's threads can take the GIL between them (one call over a
            # 0.5 s flush held it for up to ~7 ms: bench/ring_gil_stall.py)
            for a in range(0, len(idx), _BOOK_SLICE):
                part = lists if len(idx) <= _BOOK_SLICE else [x[a:a + _BOOK_SLICE] for x in lists]
                errors += [a + j for j in _BOOK_LOOP(state, _KIND_CODE, own._pos, own.uniq, own.codes,
                                                     *part, "xfer", "region")]
            for j in errors:
                if self.on_error is not None:
                    self.on_error({"seq": batch.column("seq")[int(idx[j])].as_py(), "agent": agents[j],
                                   "request": reqs[j], "xfer": xfers[j]})
        elif len(idx):
            refs, last, open_, inflight, xown = self._refs, self._last_t, self._open, self._inflight, self._xfer_owner
            slots, deps = self._slots, self._deps
            for j, i in enumerate(idx):
                kind, req = kinds_[j], reqs[j]
                if req is not None:
                    owner = req
                elif kind in _XFER_KINDS and xfers[j] is not None:
                    owner = ("xfer", xfers[j])
                    own.set(i, owner)
                elif kind in _REG_KINDS:
                    owner = ("region", agents[j], addrs[j])
                    own.set(i, owner)
                else:
                    continue
                if kind == "alloc" or kind == "free":
                    sl = slot_lists[j]
                    if not sl:
                        continue
                    agent, pool = agents[j], pools[j]
                    if kind == "alloc":
                        n = 0
                        held_here = slots.setdefault((agent, pool), {})
                        for key in sl:
                            v = held_here.get(key)
                            if v is None:       # taken from free (a shared alloc of an unheld slot starts one too):
                                held_here[key] = owner      # its founder, referenced until the generation ends
                                n += 1
                            elif type(v) is not list:   # held once by its founder
                                if v == owner:
                                    held_here[key] = [v, {v: 2}]
                                else:           # joins: it reads what the founder wrote (referenced while it holds)
                                    deps.setdefault(owner, set()).add(v)
                                    held_here[key] = [v, {v: 1, owner: 1}]
                                    n += 1
                            else:
                                founder, held = v
                                if founder != owner and owner not in held:
                                    deps.setdefault(owner, set()).add(founder)
                                    n += 1
                                held[owner] = held.get(owner, 0) + 1
                        if n:
                            refs[owner] = refs.get(owner, 0) + n
                    else:
                        t = ts[j]
                        ended: dict = {}
                        held_here = slots.get((agent, pool), {})
                        for key in sl:
                            v = held_here.get(key)
                            if v is None:
                                continue
                            if type(v) is not list:
                                if v == owner:      # the generation ends: its founder lets go
                                    del held_here[key]
                                    ended[owner] = ended.get(owner, 0) + 1
                                continue
                            founder, held = v
                            c = held.get(owner)
                            if c:
                                if c <= 1:
                                    del held[owner]
                                    if owner != founder:    # a joiner lets go
                                        ended[owner] = ended.get(owner, 0) + 1
                                else:
                                    held[owner] = c - 1
                                if not held:       # the generation ends: its founder lets go
                                    del held_here[key]
                                    ended[founder] = ended.get(founder, 0) + 1
                        if not held_here:
                            slots.pop((agent, pool), None)
                        for m, n in ended.items():      # _unref, inlined
                            left = refs.get(m, 0) - n
                            if left <= 0:
                                refs.pop(m, None)
                            else:
                                refs[m] = left
                            if t > last.get(m, -1):
                                last[m] = t
                elif kind == "xfer_post":
                    xfer = xfers[j]
                    if xfer in inflight:           # a re-post before completion: one reference
                        self._unref(inflight.pop(xfer), ts[j])
                    inflight[xfer] = owner
                    xown[xfer] = owner
                    refs[owner] = refs.get(owner, 0) + 1
                elif kind in _XFER_END:
                    xfer = xfers[j]
                    if xfer in inflight:
                        self._unref(inflight.pop(xfer), ts[j])
                    if kind == "xfer_error" and self.on_error is not None:
                        self.on_error({"seq": batch.column("seq")[int(i)].as_py(), "agent": agents[j],
                                       "request": req, "xfer": xfer})
                elif kind == "req_start":
                    open_.add(owner)
                elif kind == "req_done" or kind == "req_abort":
                    open_.discard(owner)
                elif kind == "register":
                    refs[owner] = refs.get(owner, 0) + 1
                elif kind == "deregister" and refs.get(owner):
                    self._unref(owner, ts[j])
        own._pos = None
        last = self._last_t
        for o, t in own.last_times(batch.column("t_ns")):
            if o is not None and t > last.get(o, -1):
                last[o] = t
        return own

    def _ingest_descs(self, batch: pa.RecordBatch) -> "Owners":
        own = Owners.encode(batch.column("xfer"))
        own.uniq = [self._xfer_owner.get(x, ("xfer", x)) for x in own.uniq]
        return own

    # ------------------------------------------------------------ eviction
    def _effective(self, local: bool = False) -> dict:
        """owner -> until when it must be kept: ``_LIVE`` while it or an owner depending on
        it is live, else the latest time it or such an owner stopped being live. The
        dependencies are this shard's and the ones the session's other shards saw
        (set_remote): decode sees its prefix cache pass a page from one request to the
        next, and prefill must keep the request that filled it as long as decode does.
        ``local``: live by this shard's own state only, not because another shard says so."""
        refs, open_, remote = self._refs, self._open, (frozenset() if local else self._remote)
        eff = {o: _LIVE if (o in refs or o in open_ or o in remote) else t for o, t in self._last_t.items()}
        deps, rdeps = self._deps, self._remote_deps
        # latest first: an owner is raised once, by the latest owner depending on it, and a
        # later push stops there (a chain of n dependencies: n steps, not n^2)
        for o in sorted((o for o in (*deps, *rdeps) if o in eff), key=eff.__getitem__, reverse=True):
            v = eff[o]
            todo = [*deps.get(o, ()), *rdeps.get(o, ())]
            while todo:     # push o's time to what it depends on, and theirs (each only if later)
                f = todo.pop()
                if eff.get(f, v) < v:
                    eff[f] = v
                    todo += deps.get(f, ())
                    todo += rdeps.get(f, ())
        return eff

    def depends(self) -> list[list[str]]:
        """[request, request it depends on] pairs this shard saw (its own only): what the
        other shards need, to keep the second as long as they keep the first."""
        return [[o, f] for o, fs in self._deps.items() if isinstance(o, str)
                for f in sorted(fs, key=str) if isinstance(f, str)]

    def live_requests(self) -> tuple[list[str], dict[str, int]]:
        """What this shard publishes to the session's other shards: the requests it keeps
        live now, and for the other requests it still holds, when they stopped being live
        (a request someone depends on: when that one did, if later). By this shard's own
        state: a request published because the other shard published it would keep both
        shards publishing it forever (measured: the set grew with the run's length, 1600
        requests after 3000)."""
        held, refs, open_ = self._last_t, self._refs, self._open
        if not self._deps and not self._remote_deps:
            # no dependencies (no page passed between requests): _effective's values without
            # building it, in one pass over the held owners (the live ones are few)
            live = {o for o in (*refs, *open_) if isinstance(o, str) and o in held}
            return sorted(live), {o: t for o, t in held.items()
                                  if isinstance(o, str) and o not in refs and o not in open_}
        live, last = [], {}
        for o, v in self._effective(local=True).items():
            if isinstance(o, str):
                if v == _LIVE:
                    live.append(o)
                else:
                    last[o] = v
        return sorted(live), last

    def set_remote(self, requests, last: dict[str, int], now_ns: int, depends=None) -> None:
        """The other shards' view (times in this shard's clock): a request live elsewhere
        is kept here too, and one that stopped being live elsewhere is kept as long as the
        latest shard to let it go keeps it, so a request is dumped with both its ends.
        ``depends``: the [request, request it depends on] pairs they saw (their depends();
        None: as before), kept here as well."""
        if depends is not None:
            links: dict = {}
            for o, f in depends:
                links.setdefault(o, set()).add(f)
            self._remote_deps = links
        new = frozenset(requests)
        for o in self._remote - new:
            # when it stopped being live there, as that shard says (``last``), not when this
            # shard read it: both shards must keep it up to the same time, or a dump holds
            # one end of it (a receive whose send the other shard let go: measured, prefill
            # kept a request ~0.5 s longer than decode, and the analysis cut both windows at
            # its receive). The loop below takes ``last``; now only if that shard no longer
            # says (it forgot the request).
            if o not in last and o in self._last_t and now_ns > self._last_t[o]:
                self._last_t[o] = now_ns
        for o, t in last.items():
            if o in self._last_t and t > self._last_t[o]:
                self._last_t[o] = t
        self._remote = new

    @property
    def from_ns(self) -> int | None:
        """When the ring's oldest chunk starts (None: empty)."""
        return self.chunks[0].t_first if self.chunks else None

    def _evict_cut(self, now_ns: int) -> int:
        # twice the slack: a dump cuts at its window start minus one slack, so whatever
        # eviction dropped on any shard is older than every shard's dump cut (see dump()).
        # A duration ring's dumps start their duration before the trigger on every shard,
        # whatever this shard's oldest chunk: a shard that was quiet (its oldest chunk
        # recent, or none left) must not let go of what the others' windows still hold
        # (measured: prefill quiet while decode finished a long request dropped it, and
        # the dump held decode's reads with no transfer behind them)
        if self.window_ns is not None:
            return now_ns - self.window_ns - 2 * self.slack_ns
        return (self.chunks[0].t_first if self.chunks else now_ns) - 2 * self.slack_ns

    def evict(self, now_ns: int, cut_ns: int | None = None) -> None:
        """Drop chunks past the ring's bounds, keeping the facts of live owners.
        ``cut_ns``: keep the owners live at this time (default: two slacks before the
        oldest chunk left); stores that must agree on what they keep pass them one cut."""
        def over() -> bool:
            old = self.chunks[0]
            return ((self.window_ns is not None and old.t_last < now_ns - self.window_ns)
                    or (self.budget is not None and self.nbytes > self.allowance()))
        self._evict_while(over, now_ns, cut_ns)

    def _evict_while(self, over, now_ns: int, cut_ns: int | None = None) -> None:
        cut = (lambda: self._evict_cut(now_ns)) if cut_ns is None else (lambda: cut_ns)
        evicted = False
        while self.chunks and over():
            old = self.chunks.popleft()
            self.chunks_dropped += 1
            self._chunk_bytes -= old.nbytes
            self._pin(old, cut())
            evicted = True
        if evicted:
            self._batch_peak = self._held_peak()
            self._refilter(cut())
            self._pinned_total = self._pinned_bytes()
            if self.budget is not None and self._pinned_total > max(0, self.allowance()) // 2:
                self.evicted_events += sum(e[0].num_rows for e in self.pinned)
                self.pinned, self.pinned_descs = [], []  # over budget: the window start is cut
                self.state_complete = False
                self._pinned_total = self._pinned_bytes()

    def _held_peak(self) -> int:
        """The largest batch the ring holds (Arrow bytes): what evicting or dumping unpacks."""
        top = max((b.nbytes for b in self._descs), default=0)
        for c in self.chunks:
            top = max(top, _raw(c.events), max((_raw(b) for b in c.descs), default=0))
        for b, _, _ in self.pinned + self.pinned_descs:
            top = max(top, _raw(b))
        return top

    def _pin(self, chunk: _Chunk, cut: int) -> None:
        live = _Liveness(self, cut)
        if chunk.events is not None and chunk.events.num_rows:
            kept, n = _keep(chunk.events, chunk.owners, live)
            self.evicted_events += n
            self.pinned += kept
            self._pinned_total += sum(k[0].nbytes + k[1].nbytes for k in kept)
        for b, owners in zip(chunk.descs, chunk.desc_owners):
            kept = _keep(b, owners, live)[0]
            self.pinned_descs += kept
            self._pinned_total += sum(k[0].nbytes + k[1].nbytes for k in kept)

    def _refilter(self, cut: int) -> None:
        live = _Liveness(self, cut)
        for store in (self.pinned, self.pinned_descs):
            out = []
            for b, owners, oset in store:
                if all(live(o) for o in oset):     # per distinct owner, not per row
                    out.append((b, owners, oset))
                    continue
                kept, n = _keep(b, owners, live)
                out += kept
                if store is self.pinned:
                    self.evicted_events += n
            store[:] = out
        gone = {o for o in self._last_t if not live(o)}
        for o in gone:                   # no row of theirs is left in the ring: forget them
            del self._last_t[o]          # (what depends on them is gone too)
            self._deps.pop(o, None)
        for x in [x for x, o in self._xfer_owner.items() if o in gone]:
            del self._xfer_owner[x]

    # ------------------------------------------------------------ dump
    def snapshot(self, start_ns: int, end_ns: int | None = None) -> tuple[dict, dict]:
        """The batches of a dump of the window ``[start_ns, end_ns]`` (per table, in stream
        order: events by seq), and its description for shard.json.

        Each table is an iterable that unpacks one batch at a time (a dump writes it as it
        goes, so dumping never holds more than one unpacked batch beside the ring).

        Events after ``end_ns`` (the trigger) are left out, and the descriptors of postings
        left out with them: shards that dump at different moments still end at one instant,
        a consistent cut on one host's clock (a message's send is recorded before its
        receipt).

        Chunks older than the window are filtered as eviction would, with the cut at
        ``start_ns - slack``: every shard of a session dumping the same window keeps a
        request exactly when the others do. Nothing here changes the ring."""
        live = _Liveness(self, start_ns - self.slack_ns)
        events, descs, dropped = [], [], 0
        for b, owners, _ in self.pinned:
            kept, n = _keep(b, owners, live)
            events += [k[0] for k in kept]
            dropped += n
        for b, owners, _ in self.pinned_descs:
            descs += [k[0] for k in _keep(b, owners, live)[0]]
        from_seq = None
        for c in self.chunks:
            if c.t_last < start_ns:
                if c.events is not None:
                    kept, n = _keep(c.events, c.owners, live)
                    events += [k[0] for k in kept]
                    dropped += n
                for b, owners in zip(c.descs, c.desc_owners):
                    descs += [k[0] for k in _keep(b, owners, live)[0]]
                continue
            if c.events is not None:
                if from_seq is None and c.events.num_rows:
                    from_seq = c.seq0
                events.append(c.events)
            descs += c.descs
        descs += self._descs
        window_rows = sum(c.events.num_rows for c in self.chunks if c.events is not None and c.t_last >= start_ns)
        pinned = sum(b.num_rows for b in events) - window_rows
        if end_ns is not None:
            events, descs = _until(events, descs, end_ns)
        else:
            events, descs = _Unpacked(events), _Unpacked(descs)
        window = {"from_seq": from_seq, "from_t_ns": start_ns, "pinned_events": pinned,
                  "evicted_events": self.evicted_events + dropped, "state_complete": self.state_complete}
        if self.overflow_events:     # flushes larger than all the room the budget left
            window["overflow_events"] = self.overflow_events
        return {"events": events, "descs": descs, "dlists": list(self.dlists), "layouts": list(self.layouts)}, window


class _Unpacked:
    """Batches (packed or not) read back one at a time, as often as iterated."""

    def __init__(self, items: list, keep=None):
        self._items, self._keep = items, keep

    def __iter__(self):
        for b in self._items:
            b = _unpack(b)
            if self._keep is not None:
                b = self._keep(b)
            if b is not None and b.num_rows:
                yield b


#: a cut later than any event: only what is live now survives it
_NEVER = 1 << 62


def _until(events: list, descs: list, end_ns: int) -> tuple[_Unpacked, _Unpacked]:
    """Events at or before ``end_ns``; descriptors of the postings among them."""
    def early(b):
        if b.num_rows and pc.max(b.column("t_ns")).as_py() > end_ns:
            b = pc.filter(b, pc.less_equal(b.column("t_ns"), end_ns, memory_pool=_POOL), memory_pool=_POOL)
        return b
    out = _Unpacked(events, early)
    posts = set()
    for b in out:                # a first pass, one batch at a time: which postings stay
        mask = pc.equal(b.column("kind"), "xfer_post", memory_pool=_POOL)
        posts.update(x for x in pc.filter(b.column("xfer"), mask, memory_pool=_POOL).to_pylist())
    keep = pa.array(sorted(posts), pa.int64())

    def posted(b):
        m = pc.is_in(b.column("xfer"), value_set=keep, memory_pool=_POOL)
        if pc.all(m).as_py():
            return b
        return pc.filter(b, m, memory_pool=_POOL) if pc.any(m).as_py() else None
    return out, _Unpacked(descs, posted)


class _Liveness:
    """``live(owner)`` at one cut: kept while it, or an owner depending on it, is live or
    stopped being live at or after the cut (RingStore._effective, computed once)."""

    def __init__(self, store: RingStore, cut: int):
        self._store, self._cut, self._eff = store, cut, store._effective()

    def __call__(self, owner) -> bool:
        if owner is None:
            return False
        v = self._eff.get(owner)
        if v is None:   # no row of it recorded here: live only by its references
            st = self._store
            return owner in st._refs or owner in st._open or owner in st._remote
        return v >= self._cut


def _keep(batch: "Packed | pa.RecordBatch", owners: "Owners", live) -> tuple[list, int]:
    """([(rows of live owners, their owners, owner set)] or [], how many rows were dropped).
    A packed batch stays packed: it is unpacked only when some rows go and others stay."""
    alive = [bool(live(o)) for o in owners.uniq]
    if all(alive):
        return [(batch, owners, set(owners.uniq))], 0
    keep = np.asarray(alive, dtype=bool)[owners.codes]
    n = int(len(keep) - np.count_nonzero(keep))
    if n == len(keep):
        return [], n
    kept = owners.subset(keep, alive)
    rows = pc.filter(_unpack(batch), np_arrow(keep, pa.bool_()), memory_pool=_POOL)
    return [(Packed(rows) if isinstance(batch, Packed) else rows, kept, set(kept.uniq))], n


#: The pool of every Arrow buffer the ring makes (packing, filtering, its bookkeeping's
#: kernels): the system allocator. pyarrow's default pool (mimalloc) kept the freed
#: transient buffers of this work cached: measured, a 2 MB ring process stayed 13-16 MiB
#: above file recording with nothing held in Arrow; with this pool, 1 MiB.
_POOL = pa.system_memory_pool()
#: how a batch is packed: LZ4 over its Arrow IPC stream (measured on recorded traces: events
#: 3.2x, descriptor batches 3.9x smaller, at about 1 us per event; zstd packs 5.8x at 5x
#: the CPU). In this thread: the IPC writer's threaded compression allocates in the
#: default pool from Arrow's worker threads.
_CODEC = "lz4"


class Packed:
    """One record batch as the ring holds it: its Arrow IPC stream (schema, dictionaries,
    the batch), LZ4-compressed, in one exact-size ``bytes`` object.

    Why: the Recorder's batches are built row by row; their buffers grew by doubling and
    each array brings C++ objects, all scattered among short-lived allocations. Held for
    minutes they cost the process about twice their Arrow bytes (bench/bench_ring.py).
    Packed, a batch is one allocation of a third to a quarter of its Arrow bytes."""

    __slots__ = ("data", "size", "num_rows", "raw")

    def __init__(self, batch: pa.RecordBatch):
        sink = pa.BufferOutputStream(memory_pool=_POOL)
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        stream = sink.getvalue()
        self.size = stream.size
        self.data = pa.compress(stream, codec=_CODEC, asbytes=True, memory_pool=_POOL)   # an exact-size copy
        self.num_rows = batch.num_rows
        self.raw = batch.nbytes

    def unpack(self) -> pa.RecordBatch:
        """The batch again (its buffers point into one decompressed buffer)."""
        stream = pa.decompress(self.data, self.size, codec=_CODEC, memory_pool=_POOL)
        return pa.ipc.open_stream(stream).read_next_batch()

    @property
    def nbytes(self) -> int:
        """What the ring counts: the larger of its Arrow bytes (what a dump writes) and the
        memory it takes (the packed bytes and the object)."""
        return max(self.raw, len(self.data) + 100)


def _raw(b) -> int:
    """Arrow bytes of a batch, packed or not."""
    return 0 if b is None else b.raw if isinstance(b, Packed) else b.nbytes


def _unpack(b) -> pa.RecordBatch:
    return b.unpack() if isinstance(b, Packed) else b


#: Memory of one entry of the liveness bookkeeping, per structure: the Python objects
#: measured (sys.getsizeof, deeply) over 1500 reference-engine requests recorded into a 2 MB
#: ring: last-seen times ~115-135 B per owner, transfer owners ~96 B, partner sets ~260 B,
#: slot holders/generations 300-570 B; counted with room to spare. "holder": each holder of a
#: shared slot past the first (its entry in the slot's holders dict): 36-42 B measured the same
#: way with 64-512 slots each held by 50-400 requests at once (test_ring_bookkeeping.py).
_BOOK = {"last_t": 160, "xfer": 128, "deps": 320, "slot": 640, "holder": 64, "small": 256}
#: "live now" in RingStore._effective (later than any time)
_LIVE = float("inf")

#: Python memory a batch's distinct owner costs while the batch is in the ring: its entry in
#: the batch's owner list (the key object and the pointer) and its share of the liveness
#: bookkeeping (last-seen times, references, generation members). Measured by tracemalloc
#: over 1500 reference-engine requests replayed into an 8 MB ring: about 200 bytes per
#: (batch, owner) entry at the margin; counted with room to spare.
OWNER_BYTES = 256


class Owners:
    """The owner key of every row of a batch, held compactly: one int32 code per row into
    a list of the batch's distinct owners (a flush has many rows per request), so a ring of
    N rows with K distinct owners per batch costs 4 N + OWNER_BYTES K bytes here, counted in
    the store's size, not a Python object per row."""

    __slots__ = ("codes", "uniq", "_pos")

    def __init__(self, codes: np.ndarray, uniq: list):
        self.codes, self.uniq = codes, uniq
        self._pos = None

    @classmethod
    def encode(cls, column) -> "Owners":
        """Owners keyed by a column's values (a null value: the owner None)."""
        enc = pc.dictionary_encode(column, memory_pool=_POOL)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        uniq = enc.dictionary.to_pylist()
        codes = enc.indices
        if codes.null_count:
            codes = codes.fill_null(len(uniq))
            uniq.append(None)
        return cls(np.array(codes.to_numpy(zero_copy_only=False), dtype=np.int32), uniq)

    def set(self, row: int, owner) -> None:
        """Give one row another owner (a NIXL fact without a request: its transfer/region)."""
        pos = self._pos
        if pos is None:     # built on first use (dropped once the batch is ingested)
            pos = self._pos = {o: j for j, o in enumerate(self.uniq)}
        j = pos.get(owner)
        if j is None:
            j = pos[owner] = len(self.uniq)
            self.uniq.append(owner)
        self.codes[row] = j

    def last_times(self, t_ns) -> list:
        """(owner, its latest t_ns among these rows) per distinct owner."""
        t = np.asarray(t_ns.to_numpy(zero_copy_only=False), dtype=np.int64)
        top = np.full(len(self.uniq), -1, dtype=np.int64)
        np.maximum.at(top, self.codes, t)
        return [(o, int(v)) for o, v in zip(self.uniq, top) if v >= 0]

    def subset(self, keep: np.ndarray, alive: list) -> "Owners":
        """The owners of the rows ``keep`` selects, dead owners dropped from the list."""
        remap = np.cumsum(np.asarray(alive, dtype=np.int32)) - 1
        return Owners(remap[self.codes[keep]].astype(np.int32), [o for o, a in zip(self.uniq, alive) if a])

    @property
    def nbytes(self) -> int:
        """The codes plus :data:`OWNER_BYTES` per distinct owner."""
        return int(self.codes.nbytes) + OWNER_BYTES * len(self.uniq) + 56

    def __len__(self) -> int:
        return len(self.codes)

