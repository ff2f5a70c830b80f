"""Recorder: one per process ("shard"), columnar buffers flushed to Arrow IPC streams.

Hot path: ``event()`` appends one tuple, no lock (in C when tracer/_rows.c is built); ``descs_array()``/``dlist_array()``
take whole numpy arrays. A background thread turns buffers into complete record
batches every ``flush_interval`` seconds or ``flush_rows`` rows, writing descs, dlists
and layouts *before* the events that reference them. A kill -9 therefore loses at most
the last flush window; every batch already written is a complete IPC message.

No row is lost silently: a batch reaches its file whole or not at all (a failed write is
cut back off the file), rows leave the buffer only once written, a failed flush keeps
them for the next one, and rows that cannot be kept (invalid values, a backlog past
``max_backlog_rows``, a write still failing at close) are counted by table with the
event seqs they leave out, in ``shard.json``'s ``lost`` entry.
"""
from __future__ import annotations

import contextlib
import contextvars
import errno
import itertools
import json
import operator
import os
import socket
import sys
import threading
import time
from threading import get_ident
from time import monotonic_ns
from typing import Sequence

import numpy as np
import pyarrow as pa

from . import manifest as _manifest
from .gil import yielding
from .async_sums import UNKNOWN as _UNKNOWN, Hasher, Pending, SumJob
from .schema import DESCS, DLISTS, EVENTS, LAYOUTS, SHARD_INFO, EventKind

_EVENT_COLS = EVENTS.names  # tuple positions in the per-event buffer follow this order
_N_EVENT_COLS = len(_EVENT_COLS)
_CS, _DETAIL = _EVENT_COLS.index("checksums"), _EVENT_COLS.index("detail")


def _dict_strings(schema: pa.Schema, names: tuple[str, ...]) -> pa.Schema:
    """The on-disk variant of an array-path schema: repeated names dictionary-encoded
    (the contract allows it; readers see plain strings)."""
    return pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), pa.string())) if f.name in names else f
                      for f in schema], metadata=schema.metadata)


_DESCS_WIRE = _dict_strings(DESCS, ("op", "src_agent", "dst_agent"))
_DLISTS_WIRE = _dict_strings(DLISTS, ("agent", "remote_agent", "mem_type"))
_GETTERS = [operator.itemgetter(i) for i in range(_N_EVENT_COLS)]

#: the request that events default to inside ``Recorder.request(...)``
current_request: contextvars.ContextVar[str | None] = contextvars.ContextVar("kvtrace_request", default=None)


# one encoder, reused: json.dumps(d, separators=(",", ":")) builds a new one per call
_JSON = json.JSONEncoder(separators=(",", ":")).encode
_KIND = {k: k.value for k in EventKind}   # enum .value goes through a descriptor per access


_I32, _U64 = np.dtype(np.int32), np.dtype(np.uint64)
_SHARED = _JSON({"shared": True})
_REASONS: dict = {}   # free reason -> its detail text (engines use a handful of reasons)


def _reason_detail(reason) -> str:
    """``{"reason": reason}`` as JSON text, the common ones encoded once."""
    text = _REASONS.get(reason) if type(reason) is str else None
    if text is None:
        text = _JSON({"reason": reason})
        if type(reason) is str and len(_REASONS) < 256:
            _REASONS[reason] = text
    return text


class _RequestScope:
    """``with recorder.request(key):`` -- sets :data:`current_request` for the block."""

    __slots__ = ("request", "token")

    def __init__(self, request):
        self.request = request

    def __enter__(self) -> None:
        self.token = current_request.set(self.request)

    def __exit__(self, *exc) -> bool:
        current_request.reset(self.token)
        return False


def _col(v, dtype, n: int):
    """``v`` as an n-long column of ``dtype``: as is when it already is one, else broadcast."""
    if type(v) is np.ndarray and v.dtype == dtype and v.shape == (n,):
        return v
    return np.broadcast_to(np.asarray(v, dtype), (n,))


def _col0(v, dtype, n: int):
    """``v`` as an n-long column of ``dtype``, or as a 0-d array when it is one value for
    all n (expanded by _descs_batch); converted here, so a bad value fails at the call."""
    if type(v) is np.ndarray and v.dtype == dtype and v.shape == (n,):
        return v
    a = np.asarray(v, dtype)
    return a if a.ndim == 0 else np.broadcast_to(a, (n,))


def _text(name):
    """An agent name as text (nixl hands some out as bytes)."""
    return bytes(name).decode("utf-8", "replace") if isinstance(name, (bytes, bytearray)) else name


def np_arrow(data: np.ndarray, typ: pa.DataType, mask: np.ndarray | None = None) -> pa.Array:
    """``pa.array(data, type=typ, mask=mask)`` for a numpy column of a fixed-width integer
    or bool type (no copy, data cast to ``typ``'s dtype as ``astype`` does). Built from
    the buffers: ``pa.array`` of an ndarray makes numpy import ``numpy.ma`` (~15 ms of CPU,
    holding the GIL) in a process that has not yet -- the first flush of every recording
    process paid it while the engine served."""
    n = len(data)
    if typ == pa.bool_():
        buf = pa.py_buffer(np.packbits(np.asarray(data, dtype=bool), bitorder="little"))
    else:
        buf = pa.py_buffer(np.ascontiguousarray(data, dtype=typ.to_pandas_dtype()))
    if mask is None or not mask.any():
        return pa.Array.from_buffers(typ, n, [None, buf])
    valid = pa.py_buffer(np.packbits(~np.asarray(mask, dtype=bool), bitorder="little"))
    return pa.Array.from_buffers(typ, n, [valid, buf], null_count=int(np.count_nonzero(mask)))


def _col_array(name: str, values: list, typ: pa.DataType) -> pa.Array:
    return pa.array(values, type=typ)


class Recorder:
    """Writes one shard of a trace. Thread-safe; one instance per process.

    Args:
        trace_dir: the trace directory (created if needed; its manifest gains this shard).
        shard: shard name, unique within the trace (e.g. "prefill", "decode-1").
        flush_interval: seconds between background flushes (the kill -9 loss window).
        flush_rows: buffered rows that trigger an early flush.
        manifest_extra: fields merged into manifest.json (command, workload, ...).
        max_backlog_rows: rows kept for retry while writes fail; past it they are counted lost.
    """

    def __init__(self, trace_dir: str, shard: str = "main", *, flush_interval: float = 0.2,
                 flush_rows: int = 65536, manifest_extra: dict | None = None,
                 max_backlog_rows: int = 1 << 22):
        self.trace_dir = os.fspath(trace_dir)
        self.shard = shard
        self.dir = os.path.join(self.trace_dir, shard)
        os.makedirs(self.dir, exist_ok=True)
        self.flush_interval = flush_interval
        self.flush_rows = flush_rows
        self._lock = threading.Lock()          # guards the array-path buffers and the thread map
        self._io_lock = threading.Lock()       # one flush at a time
        # The event path takes no lock: next() on a count and list.append are each atomic
        # under the GIL, so every seq lands in the buffer exactly once, possibly out of
        # order across threads; flush() sorts and holds back rows after a gap (a thread
        # between next() and append) so each stream stays strictly increasing. The C
        # methods (_native_methods) use the same count, list and thread map; they read the
        # clock, take the seq and append with no Python code between (no thread switch).
        self._seq = itertools.count()
        self._written_seq = 0                  # the next seq the events stream expects
        self._flushed_seq = 0
        self._xfer_ids = itertools.count()
        self._dlist_ids = itertools.count()
        self._threads: dict[int, int] = {}
        self._events: list[tuple] = []
        self._descs: list[dict] = []
        self._dlists: list[dict] = []
        self._layouts: list[dict] = []
        self._pending_rows = 0
        self._append = self._events.append        # bound once: the buffer list is never replaced
        self._thread_of = self._threads.get
        self._next_seq = self._seq.__next__
        self._expand = None                       # the C layers()'s entries -> their rows (_native_methods)
        if NATIVE_ROWS is not None and hasattr(NATIVE_ROWS, "appender"):   # an older build has none
            self._native_methods()
        self.closed = False
        self.max_backlog_rows = max_backlog_rows
        self.lost = LostRows()
        self._warned: set[str] = set()
        self._info_dirty = False
        self._t0 = time.monotonic_ns()
        self._hasher: Hasher | None = None      # started by the first write_async
        self._info = {"pid": os.getpid(), "host": socket.gethostname(),
                      "clock": f"monotonic_ns@{socket.gethostname()}", "closed": False,
                      "started_unix": time.time(), "shard": shard,
                      # how stale an unwritten event can be: `kvtrace watch` waits that long for a quiet shard
                      "flush_interval_s": float(flush_interval)}
        self._write_info()
        self._writers = self._open_streams()
        _manifest.add_shard(self.trace_dir, shard, manifest_extra or {})
        self._wake = threading.Event()
        self._stop = False
        self._flusher = threading.Thread(target=self._flush_loop, name=f"kvtrace-flush-{shard}", daemon=True)
        self._flusher.start()

    def _open_streams(self) -> dict:
        """The four tables' stream files, each opened with its schema (readable at once)."""
        return {name: _Stream(os.path.join(self.dir, name + ".arrows"), schema)
                for name, schema in (("descs", _DESCS_WIRE), ("dlists", _DLISTS_WIRE),
                                     ("layouts", LAYOUTS), ("events", EVENTS))}

    def _native_methods(self) -> None:
        """The per-event methods in C (tracer/_rows.c ``appender``): the same rows on this
        recorder's own buffer, seq counter and thread map, with no Python frame per call
        (tests/tracer/test_appender.py). A subclass's own version of a method is kept.
        One difference: the C ``layers`` buffers one entry per call, not a row per layer; the
        flush makes it into those rows (``_rows.expand``) when it takes the buffer, so the
        engine's thread builds one tuple per call (measured on the reference engine at 61
        layers: bench/results/ring.txt, 2026-12-06 issue 20 ref20)."""
        ap = NATIVE_ROWS.appender(self, self._events, self._seq, self._threads, current_request, _KIND, _JSON,
                                  _SHARED, _reason_detail, (_PY_METHODS["layers"], _PY_METHODS["allocs"],
                                                            _PY_METHODS["frees"]))
        cls = type(self)
        for name, fn in _PY_METHODS.items():
            if getattr(cls, name) is fn:
                setattr(self, name, getattr(ap, name))
        self._expand = getattr(NATIVE_ROWS, "expand", None)   # an older build has none (nor entries)

    def _buffered(self) -> list[tuple]:
        """The event rows buffered now, as the flush takes them (a C ``layers`` call's entry
        made into its rows)."""
        rows = list(self._events)
        return rows if self._expand is None else self._expand(rows)

    def _thread_id(self) -> int:
        with self._lock:
            return self._threads.setdefault(get_ident(), len(self._threads))

    def pin_thread(self, thread: int) -> None:
        """Record the calling Python thread's next events under thread number ``thread``
        (a writer re-emitting recorded events, e.g. replay, keeps their thread column)."""
        with self._lock:
            self._threads[get_ident()] = int(thread or 0)

    # ---------------------------------------------------------------- ids
    def new_xfer_id(self) -> int:
        """A fresh transfer id (every posting gets one)."""
        return next(self._xfer_ids)

    def new_dlist_id(self) -> int:
        """A fresh prepared-list id."""
        return next(self._dlist_ids)

    # ---------------------------------------------------------------- events
    def event(self, kind: str | EventKind, agent: str | None = None, request: str | None = None, *,
              pool: str | None = None, layer: int | None = None, slots: Sequence[int] | None = None,
              pages: Sequence[int] | None = None, checksums: Sequence[int] | None = None,
              xfer: int | None = None, peer: str | None = None, addr: int | None = None,
              nbytes: int | None = None, mem_type: str | None = None, device: int | None = None,
              msg: bytes | None = None, status: str | None = None, detail: dict | str | None = None,
              t_ns: int | None = None) -> int:
        """Record one event; returns its seq. ``request`` defaults to the current context."""
        if request is None:
            request = current_request.get()
        if detail is not None and type(detail) is not str:
            detail = _JSON(detail)
        if type(kind) is not str:
            kind = _KIND[kind]
        th = self._thread_of(get_ident())
        if th is None:
            th = self._thread_id()
        seq = self._next_seq()
        self._append((seq, t_ns or monotonic_ns(), th, agent, kind, request, pool, layer, slots, pages,
                             checksums, xfer, peer, addr, nbytes, mem_type, device, msg, status, detail))
        # is_set first: set() takes a lock, and until the flusher catches up every event
        # past the threshold would call it
        if seq - self._flushed_seq >= self.flush_rows and not self._wake.is_set():
            self._wake.set()
        return seq

    def nixl_event(self, kind: str, agent: str, request, xfer=None, peer=None, nbytes=None, msg=None,
                   status=None, detail=None) -> int:
        """:meth:`event` for the NIXL tap's rows (kind a ``str``, detail text or None,
        positional): the same row, without the keyword handling (several per posting)."""
        if request is None:
            request = current_request.get()
        th = self._thread_of(get_ident())
        if th is None:
            th = self._thread_id()
        seq = self._next_seq()
        self._append((seq, monotonic_ns(), th, agent, kind, request, None, None, None, None,
                      None, xfer, peer, None, nbytes, None, None, msg, status, detail))
        if seq - self._flushed_seq >= self.flush_rows and not self._wake.is_set():
            self._wake.set()
        return seq

    # Slot, page and checksum lists are kept as tuples: a row whose values are all
    # immutable leaves the garbage collector's lists at its first collection, so a
    # flush's worth of buffered rows is not traversed again by the older generations
    # (measured on the reference engine: GC was ~15 ms of a ~110 ms recording cost).
    # ------------------------------------------------------------ batched events
    # The same rows as the per-call methods (tests/tracer/test_recorder_batch.py), one
    # call per engine step or request: the tuples are built in one comprehension and
    # enter the buffer with one ``extend`` (atomic under the GIL, like ``append``), one
    # clock reading for the batch.
    def _batch_head(self, request):
        if request is None:
            request = current_request.get()
        th = self._thread_of(get_ident())
        if th is None:
            th = self._thread_id()
        return request, th, monotonic_ns()

    def _batch_tail(self, rows: list) -> int:
        if not rows:
            return -1
        self._events.extend(rows)
        if rows[-1][0] - self._flushed_seq >= self.flush_rows and not self._wake.is_set():
            self._wake.set()
        return rows[0][0]

    def layers(self, kind: str | EventKind, agent: str, request: str | None, pool: str, layers: int,
               slots: Sequence[int], pages: Sequence[int] | None = None,
               checksums: Sequence[Sequence[int]] | None = None) -> int:
        """One ``kind`` event (``write`` or ``read``) per layer 0..layers-1 of ``pool``, all
        of the same slots and pages; ``checksums[layer]``: that layer's sums (None: none).
        What ``event(kind, ..., layer=l, ...)`` per layer records. Returns the first seq."""
        if type(kind) is not str:
            kind = _KIND[kind]
        request, th, t = self._batch_head(request)
        slots = tuple(slots)
        pages = tuple(pages) if pages is not None else None
        if kind == "write" and self._hasher is not None and self._hasher.busy:
            for layer in range(layers):
                self._hasher.rewritten(agent, pool, layer, slots, request)
        nxt = self._next_seq
        if checksums is None:
            rows = [(nxt(), t, th, agent, kind, request, pool, layer, slots, pages, None, None, None, None,
                     None, None, None, None, None, None) for layer in range(layers)]
        else:
            rows = [(nxt(), t, th, agent, kind, request, pool, layer, slots, pages,
                     tuple(checksums[layer]), None, None, None, None, None, None, None, None, None)
                    for layer in range(layers)]
        return self._batch_tail(rows)

    def allocs(self, agent: str, request: str | None, items, *, shared: bool = False) -> int:
        """:meth:`alloc` of each ``(pool, slots, pages)`` or ``(pool, slots, pages, shared)``
        of ``items`` (pages None: 0..n-1; without its own flag an item is ``shared``), in
        order. Returns the first seq (-1: no items)."""
        request, th, t = self._batch_head(request)
        items = [(it[0], tuple(it[1]), tuple(it[2]) if it[2] is not None else tuple(range(len(it[1]))),
                  _SHARED if (it[3] if len(it) > 3 else shared) else None) for it in items]
        if self._hasher is not None and self._hasher.busy:
            for pool, slots, _, _ in items:
                self._hasher.wait_slots(agent, pool, slots)
        nxt = self._next_seq
        return self._batch_tail([(nxt(), t, th, agent, "alloc", request, pool, None, slots, pages, None, None,
                                  None, None, None, None, None, None, None, text)
                                 for pool, slots, pages, text in items])

    def frees(self, agent: str, request: str | None, items, *, reason: str | None = None) -> int:
        """:meth:`free` of each ``(pool, slots)`` of ``items``, in order (empty slot lists
        are recorded, as free records them). Returns the first seq (-1: no items)."""
        request, th, t = self._batch_head(request)
        items = [(p, tuple(s)) for p, s in items]
        if self._hasher is not None and self._hasher.busy:
            for pool, slots in items:
                self._hasher.wait_slots(agent, pool, slots)
        text = _reason_detail(reason) if reason else None
        nxt = self._next_seq
        return self._batch_tail([(nxt(), t, th, agent, "free", request, pool, None, slots, None, None, None,
                                  None, None, None, None, None, None, None, text) for pool, slots in items])

    def request(self, request: str) -> "_RequestScope":
        """Attribute events recorded inside the block (this thread/task) to ``request``
        (a plain class, not a generator context manager: engines enter one per request
        per step, and contextlib's costs ~1.5 us a block)."""
        return _RequestScope(request)

    # ---------------------------------------------------------------- array paths
    def descs_array(self, xfer: int, op: str, src_agent: str, dst_agent: str,
                    src_addr, dst_addr, nbytes, *, src_device=0, dst_device=0,
                    src_dlist: int | None = None, src_idx=None, dst_dlist: int | None = None,
                    dst_idx=None) -> None:
        """Record every descriptor of one posting; address/size/index columns as arrays."""
        self.descs_posted(xfer, self.descs_prepared(op, src_agent, dst_agent, src_addr, dst_addr, nbytes,
                                                    src_device=src_device, dst_device=dst_device,
                                                    src_dlist=src_dlist, src_idx=src_idx,
                                                    dst_dlist=dst_dlist, dst_idx=dst_idx))

    @staticmethod
    def descs_prepared(op: str, src_agent: str, dst_agent: str, src_addr, dst_addr, nbytes, *, src_device=0,
                       dst_device=0, src_dlist: int | None = None, src_idx=None, dst_dlist: int | None = None,
                       dst_idx=None) -> tuple:
        """:meth:`descs_array`'s columns checked and converted once, for :meth:`descs_posted`
        of each posting of one transfer handle (its descriptors are the same every time;
        the arrays are kept as given: they must not change afterwards)."""
        src_addr = np.asarray(src_addr, dtype=np.uint64)
        n = len(src_addr)
        src_agent, dst_agent = _text(src_agent), _text(dst_agent)  # bytes names would fail the whole write
        # _DESCS_CHUNK order less the xfer id: the arrays as given, the per-posting values
        # (names, dlist ids, a device or size shared by every descriptor) once;
        # _descs_batch expands them and numbers the positions once per flush
        return (op, src_agent, dst_agent, src_addr, np.asarray(dst_addr, np.uint64),
                _col0(nbytes, _U64, n), _col0(src_device, _I32, n), _col0(dst_device, _I32, n),
                src_dlist, None if src_idx is None else np.asarray(src_idx, np.int64),
                dst_dlist, None if dst_idx is None else np.asarray(dst_idx, np.int64), n)

    def descs_posted(self, xfer: int, prepared: tuple) -> None:
        """Record the descriptors of posting ``xfer`` (``prepared``: from :meth:`descs_prepared`)."""
        with self._lock:
            self._descs.append((int(xfer),) + prepared)
            self._pending_rows += prepared[-1]
        if self._pending_rows >= self.flush_rows and not self._wake.is_set():
            self._wake.set()

    def dlist_array(self, dlist: int, agent: str, remote_agent: str | None, addr, nbytes, device=0,
                    mem_type: str | None = None) -> None:
        """Record a prepared descriptor list (entry i has index i)."""
        addr = np.asarray(addr, dtype=np.uint64)
        n = len(addr)
        agent, remote_agent = _text(agent), _text(remote_agent)
        cols = {"dlist": np.full(n, dlist, np.int64), "agent": agent, "remote_agent": remote_agent,
                "idx": np.arange(n, dtype=np.int64), "addr": addr,
                "nbytes": np.broadcast_to(np.asarray(nbytes, np.uint64), (n,)),
                "device": np.broadcast_to(np.asarray(device, np.int32), (n,)), "mem_type": mem_type, "_n": n}
        with self._lock:
            self._dlists.append(cols)
            self._pending_rows += n

    def untraced(self, reason: str) -> None:
        """Count a posting that went to NIXL without being recorded, by ``reason``
        (reported in shard.json, ``kvtrace info`` and ``check``'s notes)."""
        with self._lock:
            self.lost.untraced[reason] = self.lost.untraced.get(reason, 0) + 1
        if self.closed:  # no flush will come: say it now
            self._save_lost()
        else:
            self._info_dirty = True

    # ---------------------------------------------------------------- engine / allocator hooks
    def layout(self, agent: str, pool: str, layer: int, addr: int, slot_bytes: int, num_slots: int, *,
               page_tokens: int = 1, dtype: str = "bytes", part: str | None = None,
               mem_type: str = "DRAM", device: int = 0, nbytes: int | None = None,
               from_seq: int | None = None) -> None:
        """Declare what a region means: slot s of (pool, layer) is [addr+s*slot_bytes, +slot_bytes)."""
        row = {"agent": agent, "pool": pool, "layer": layer, "part": part, "addr": addr,
               "nbytes": nbytes if nbytes is not None else slot_bytes * num_slots,
               "slot_bytes": slot_bytes, "num_slots": num_slots, "page_tokens": page_tokens,
               "dtype": dtype, "mem_type": mem_type, "device": device, "from_seq": from_seq}
        with self._lock:
            self._layouts.append(row)
            self._pending_rows += 1

    def alloc(self, agent: str, request: str | None, pool: str, slots: Sequence[int],
              pages: Sequence[int] | None = None, *, shared: bool = False, detail: dict | None = None) -> int:
        """Slots of ``pool`` handed to ``request`` (``shared``: a prefix-cache reference)."""
        if detail:
            d = dict(detail)
            if shared:
                d["shared"] = True
            text = _JSON(d)
        else:
            text = _SHARED if shared else None
        if self._hasher is not None and self._hasher.busy:  # the slot's next owner writes after the hash
            self._hasher.wait_slots(agent, pool, slots)
        return self.event("alloc", agent, request, pool=pool, slots=tuple(slots),
                          pages=tuple(pages) if pages is not None else tuple(range(len(slots))),
                          detail=text)

    def free(self, agent: str, request: str | None, pool: str, slots: Sequence[int], *,
             reason: str | None = None, detail: dict | None = None) -> int:
        """Slots of ``pool`` taken back from ``request`` (reason: finish, abort, timeout...)."""
        if detail:
            d = dict(detail)
            if reason:
                d["reason"] = reason
            text = _JSON(d)
        else:
            text = _reason_detail(reason) if reason else None
        if self._hasher is not None and self._hasher.busy:  # a freed slot may be rewritten at once
            self._hasher.wait_slots(agent, pool, slots)
        return self.event("free", agent, request, pool=pool, slots=tuple(slots), detail=text)

    def write(self, agent: str, request: str | None, pool: str, layer: int, slots: Sequence[int],
              checksums: Sequence[int], pages: Sequence[int] | None = None, *, detail: dict | None = None) -> int:
        """The producer filled slots of (pool, layer); checksums are kvh64 of what it wrote."""
        if self._hasher is not None and self._hasher.busy:
            self._hasher.rewritten(agent, pool, layer, slots, request)
        return self.event(EventKind.WRITE, agent, request, pool=pool, layer=layer, slots=tuple(slots),
                          pages=tuple(pages) if pages is not None else None,
                          checksums=tuple([int(c) for c in checksums]), detail=detail)

    def write_async(self, agent: str, request: str | None, targets: Sequence[tuple[str, int]],
                    slots: Sequence[int], compute, pages: Sequence[int] | None = None) -> list[int]:
        """The producer filled ``slots`` of every (pool, layer) of ``targets``: one write event
        each, ordered (seq, time) now, their checksums computed later by ``compute()`` (one
        list per target, parallel to ``slots``) on this recorder's hashing thread (see
        async_sums.py for what that hash sees). Returns the events' seqs."""
        slots = [int(s) for s in slots]
        pages = [int(p) for p in pages] if pages is not None else None
        if self._hasher is None:
            with self._lock:
                if self._hasher is None:
                    self._hasher = Hasher(self.shard)
        if self._hasher.busy:
            for pool, layer in targets:
                self._hasher.rewritten(agent, pool, layer, slots, request)
        job = SumJob(compute, agent, [(p, int(l)) for p, l in targets], slots, request)
        seqs = [self.event(EventKind.WRITE, agent, request, pool=pool, layer=int(layer), slots=slots, pages=pages,
                           checksums=Pending(job, i)) for i, (pool, layer) in enumerate(targets)]
        self._hasher.submit(job)
        return seqs

    def hash_mark(self) -> int:
        """A mark of the hashes asked for so far (for :meth:`wait_hashes`)."""
        return 0 if self._hasher is None else self._hasher.submitted

    def wait_hashes(self, mark: int | None = None) -> None:
        """Return once the hashes asked for before ``mark`` (None: all so far) are done."""
        if self._hasher is not None and self._hasher.busy:
            self._hasher.wait(mark)

    def read(self, agent: str, request: str | None, pool: str, layer: int, slots: Sequence[int],
             checksums: Sequence[int], pages: Sequence[int] | None = None, *, detail: dict | None = None) -> int:
        """The consumer used slots of (pool, layer); checksums are kvh64 of what it saw."""
        return self.event(EventKind.READ, agent, request, pool=pool, layer=layer, slots=tuple(slots),
                          pages=tuple(pages) if pages is not None else None,
                          checksums=tuple([int(c) for c in checksums]), detail=detail)

    def mark(self, text: str, agent: str | None = None, **detail) -> int:
        """A user annotation."""
        return self.event(EventKind.MARK, agent, detail={"text": text, **detail})

    # ---------------------------------------------------------------- flushing
    def _flush_loop(self) -> None:
        while not self._stop:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                with yielding():   # opt-in short GIL switch interval (tracer/gil.py)
                    self.flush()
            except Exception as e:  # never kill the recorded program; rows are kept or counted
                self._warn("flush", f"kvtrace: recorder {self.shard}: flushing failed ({_short(e)})")

    def flush(self) -> None:
        """Write everything buffered as complete record batches (referenced tables first).

        Rows leave the buffers only once their batch is on disk; if a write fails, this and
        every later table of the flush go back to the buffers for the next flush (or are
        counted lost past ``max_backlog_rows`` and at close)."""
        with self._io_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        """flush()'s work; the caller holds ``_io_lock``."""
        n = len(self._events)
        events = self._events[:n]
        del self._events[:n]  # appends made meanwhile stay in the same list object
        if self._expand is not None:   # the C layers()'s entries into their rows (_native_methods)
            events = self._expand(events)
        events = self._in_order(events, final=self._stop)
        if self._hasher is not None:
            events = self._with_checksums(events, final=self._stop)
        with self._lock:
            descs, self._descs = self._descs, []
            dlists, self._dlists = self._dlists, []
            layouts, self._layouts = self._layouts, []
            self._pending_rows = 0
        todo = [("descs", descs), ("dlists", dlists), ("layouts", layouts), ("events", events)]
        for i, (name, rows) in enumerate(todo):
            if not rows:
                continue
            try:
                self._write(name, self._convert(name, rows), rows)
            except OSError as e:  # pyarrow's IO errors are OSErrors too: worth a retry
                self._keep_or_count(todo[i:], e)
                break
            except Exception as e:  # anything else would fail again: count, never hide
                self._keep_or_count(todo[i:], e, retry=False)
                break
            if name == "events":
                self._written_seq = rows[-1][0] + 1
                self._flushed_seq = self._written_seq
        if self._info_dirty:
            self._info_dirty = False
            self._save_lost()

    def _in_order(self, rows: list[tuple], final: bool) -> list[tuple]:
        """Rows sorted by seq; unless ``final``, rows after a gap go back to the buffer."""
        if not rows:
            return rows
        seqs = np.fromiter(map(_GETTERS[0], rows), dtype=np.int64, count=len(rows))
        if not (np.all(seqs[1:] > seqs[:-1])):
            order = np.argsort(seqs, kind="stable")
            rows = [rows[i] for i in order]
            seqs = seqs[order]
        if not final:
            expected = self._written_seq + np.arange(len(rows))
            gap = np.flatnonzero(seqs != expected)
            if len(gap):
                cut = int(gap[0])
                self._events[0:0] = rows[cut:]  # one atomic list operation
                rows = rows[:cut]
        return rows

    def _with_checksums(self, rows: list[tuple], final: bool) -> list[tuple]:
        """Write events whose hash is done get their checksums (or, unknown, a null and the
        reason in detail.checksums); unless ``final``, rows from the first one still being
        hashed on go back to the buffer (the stream stays in seq order)."""
        if final:
            self._hasher.wait()
        out = rows
        for i, row in enumerate(rows):
            p = row[_CS]
            if type(p) is not Pending:
                continue
            job = p.job
            if not job.done and final:   # asked for after the wait above (a thread racing close)
                self._hasher.wait(job.index + 1)
            elif not job.done:
                self._events[0:0] = rows[i:]  # one atomic list operation
                return out[:i]
            if out is rows:
                out = list(rows)
            why = job.why_unknown(p.i)
            if why is None:
                out[i] = row[:_CS] + ([int(c) for c in job.value[p.i]],) + row[_CS + 1:]
            else:
                d = json.loads(row[_DETAIL]) if row[_DETAIL] else {}
                d["checksums"] = f"{_UNKNOWN}: {why}"
                out[i] = row[:_CS] + (None,) + row[_CS + 1:_DETAIL] + (_JSON(d),) \
                    + row[_DETAIL + 1:]
        return out

    def _keep_or_count(self, unwritten: list[tuple[str, list]], error: Exception, retry: bool = True) -> None:
        """A write failed: put the unwritten rows back in front of their buffers, or, when
        closing or past the backlog limit, count them (and the event seqs) as lost."""
        backlog = len(self._events) + sum(_rows(name, rows) for name, rows in unwritten)
        drop = not retry or self._stop or backlog > self.max_backlog_rows
        if drop:
            for name, rows in unwritten:
                self.lost.add(name, _rows(name, rows), "write failed")
                if name == "events" and rows:
                    self.lost.add_seqs(r[0] for r in rows)
                    self._written_seq = rows[-1][0] + 1
                    self._flushed_seq = self._written_seq
            self._info_dirty = True
        else:
            for name, rows in unwritten:
                if name == "events":
                    self._events[0:0] = rows
                elif rows:
                    with self._lock:
                        buf = getattr(self, "_" + name)
                        buf[0:0] = rows
                        self._pending_rows += _rows(name, rows)
        what = "counted as lost" if drop else "kept for the next flush"
        self._warn("write", f"kvtrace: recorder {self.shard}: writing the trace failed ({_short(error)}); "
                            f"unwritten rows are {what} (see shard.json 'lost')")

    def _convert(self, name: str, rows: list) -> pa.RecordBatch | None:
        """Convert buffered rows; if some row has values of the wrong type, keep every good
        row (one at a time), count the others as lost and say once on stderr why."""
        convert = _CONVERT[name]
        try:
            return convert(rows)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as first_error:
            good = []
            for r in rows:
                try:
                    convert([r])
                    good.append(r)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    self.lost.add(name, _rows(name, [r]), "invalid values")
                    if name == "events":
                        self.lost.add_seqs([r[0]])
            self._info_dirty = True
            self._warn("convert", f"kvtrace: recorder {self.shard}: dropped rows with invalid values "
                                  f"({_short(first_error)}); counted in shard.json 'lost'")
            if not good:
                return None
            return convert(good)

    def _warn(self, key: str, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            print(text, file=sys.stderr)

    @property
    def dropped_rows(self) -> int:
        """Rows counted lost so far (all tables)."""
        return sum(self.lost.rows.values())

    def _write(self, name: str, batch: pa.RecordBatch | None, rows: list | None = None) -> None:
        """The one sink of flushed batches (ring.RingRecorder sends them to memory instead;
        ``rows``: what the batch was converted from)."""
        if batch is None:
            return
        self._writers[name].write(batch)

    def _save_lost(self) -> None:
        self._info.update(self.lost.as_info())
        try:
            self._write_info()
        except OSError as e:  # the counts stay in memory; close() tries again
            self._info_dirty = True
            self._warn("info", f"kvtrace: recorder {self.shard}: cannot update {SHARD_INFO} ({_short(e)})")

    def close(self) -> None:
        """Flush, end the streams and mark the shard closed. Idempotent."""
        if self.closed:
            return
        self._stop = True
        self._wake.set()
        self._flusher.join()
        self.flush()
        for name, stream in self._writers.items():
            try:
                stream.close()
            except OSError as e:  # every batch is already whole on disk; only the end marker is missing
                self._warn("write", f"kvtrace: recorder {self.shard}: ending {name}.arrows failed ({_short(e)})")
        self.closed = True
        self._info["closed"] = True
        self._info["events"] = self._written_seq
        self._info.update(self.lost.as_info())
        self._write_info()

    def _write_info(self) -> None:
        tmp = os.path.join(self.dir, SHARD_INFO + ".tmp")
        with open(tmp, "w") as f:
            json.dump(self._info, f)
        os.replace(tmp, os.path.join(self.dir, SHARD_INFO))

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: the methods tracer/_rows.c's appender stands in for (and, while hashing, hands batches back to)
_PY_METHODS = {name: getattr(Recorder, name) for name in ("event", "nixl_event", "layers", "allocs", "frees")}


class LostRows:
    """What a recorder could not write: rows by table and reason, event seqs left out,
    and postings that went to NIXL untraced (by reason)."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.reasons: dict[str, int] = {}
        self.seq_ranges: list[list[int]] = []   # [first, last] inclusive, merged, ascending
        self.untraced: dict[str, int] = {}

    def add(self, table: str, n: int, reason: str) -> None:
        if n:
            self.rows[table] = self.rows.get(table, 0) + n
            self.reasons[reason] = self.reasons.get(reason, 0) + n

    def add_seqs(self, seqs: Iterable[int]) -> None:
        for q in sorted(seqs):
            if self.seq_ranges and self.seq_ranges[-1][1] + 1 >= q >= self.seq_ranges[-1][0]:
                self.seq_ranges[-1][1] = max(self.seq_ranges[-1][1], q)
            else:
                self.seq_ranges.append([q, q])
        self.seq_ranges.sort()

    def as_info(self) -> dict:
        """The shard.json entries (absent when nothing was lost)."""
        out = {}
        if self.rows:
            out["lost"] = {"rows": dict(self.rows), "reasons": dict(self.reasons),
                           "event_seqs": [list(r) for r in self.seq_ranges]}
        if self.untraced:
            out["untraced_postings"] = dict(self.untraced)
        return out


class _Sink:
    """The file-like object Arrow's stream writer writes into: straight to the file (no
    copy), or nowhere while ``discard`` is set (a fresh writer's opening bytes)."""

    closed = False

    def __init__(self, fd: int):
        self.fd = fd
        self.discard = False

    def write(self, data) -> int:
        if self.discard:
            return len(memoryview(data))
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):  # a write may be short (the last bytes before a size limit)
            n = os.write(self.fd, view[done:])
            if n <= 0:
                raise OSError(errno.EIO, "short write")
            done += n
        return done

    def flush(self) -> None:
        pass


class _Stream:
    """One table's Arrow IPC stream file. A write that fails (disk full, file size limit,
    I/O error) is cut back off the file, and a fresh writer takes over, its opening bytes
    (schema, an empty batch) discarded: the writer state matches the file again
    (dictionaries are sent anew with the next batch) and the file stays one valid stream."""

    def __init__(self, path: str, schema: pa.Schema):
        self.schema = schema
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.sink = _Sink(self.fd)
        self.size = 0
        self.writer = pa.ipc.new_stream(pa.PythonFile(self.sink, mode="w"), schema)
        # schema on disk now: a crash leaves a readable stream
        self.write(pa.RecordBatch.from_pylist([], schema=schema))

    def write(self, batch: pa.RecordBatch) -> None:
        try:
            self.writer.write_batch(batch)
        except OSError:
            self._rollback()
            raise
        self.size = os.lseek(self.fd, 0, os.SEEK_CUR)

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            os.close(self.fd)

    def _rollback(self) -> None:
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, self.size)
            os.lseek(self.fd, self.size, os.SEEK_SET)
        self.sink.discard = True
        try:
            self.writer = pa.ipc.new_stream(pa.PythonFile(self.sink, mode="w"), self.schema)
            self.writer.write_batch(pa.RecordBatch.from_pylist([], schema=self.schema))
        finally:
            self.sink.discard = False


def _rows(name: str, rows: list) -> int:
    """Rows a buffer entry list stands for (array-path chunks carry many)."""
    if name == "descs":
        return sum(c[-1] for c in rows)
    if name == "dlists":
        return sum(c["_n"] for c in rows)
    return len(rows)


def _short(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:160] if text else type(e).__name__


_EVENT_STRUCT = pa.struct([pa.field(f.name, f.type) for f in EVENTS])
_SPEC_OF = {pa.int64(): "q", pa.int32(): "i", pa.uint64(): "Q", pa.string(): "s", pa.binary(): "b",
            pa.list_(pa.int64()): "l", pa.list_(pa.uint64()): "L"}
#: the events columns' types, one letter each, for the C pass (tracer/_rows.c)
_EVENT_SPEC = "".join(_SPEC_OF[f.type] for f in EVENTS).encode()

try:  # optional: an install without a C compiler has no extension (setup.py)
    from . import _rows as _c_rows
except ImportError:
    _c_rows = None
#: the C conversion of event rows, unless absent or KVTRACE_ROWS=python (both give the same rows)
NATIVE_ROWS = _c_rows if os.environ.get("KVTRACE_ROWS", "").lower() != "python" else None


def _events_batch(rows: list[tuple]) -> pa.RecordBatch:
    if NATIVE_ROWS is not None:
        # One C pass writes the Arrow buffers (tracer/_rows.c); None: some value is one it
        # leaves to pyarrow (a numpy integer, a str subclass, ...), converted below instead.
        got = NATIVE_ROWS.columns(rows, _EVENT_SPEC)
        if got is not None:
            return pa.RecordBatch._import_from_c(got[0], EVENTS)
    # One C++ pass over the row tuples (as a struct array) beats per-column Python passes.
    cols = pa.array(rows, type=_EVENT_STRUCT).flatten()
    return pa.RecordBatch.from_arrays(cols, schema=EVENTS)


def _concat_arrays(chunks: list[dict], schema: pa.Schema) -> pa.RecordBatch:
    """One batch from many array-path chunks: numpy columns concatenated once, per-chunk
    scalars (agent names, op, dlist ids) expanded with one ``take``."""
    lens = np.fromiter((c["_n"] for c in chunks), dtype=np.int64, count=len(chunks))
    expand = np.repeat(np.arange(len(chunks)), lens)
    arrays = []
    for field in schema:
        vals = [c[field.name] for c in chunks]
        if all(v is None or isinstance(v, (str, int, np.integer)) for v in vals):
            arrays.append(_scalar_column(vals, field, expand))
        else:
            parts = [np.full(n, v if v is not None else 0) if (v is None or np.ndim(v) == 0) else np.asarray(v)
                     for v, n in zip(vals, lens)]
            mask = None
            if any(v is None for v in vals):
                mask = np.repeat(np.fromiter((v is None for v in vals), dtype=bool, count=len(vals)), lens)
            arr = np_arrow(np.concatenate(parts).astype(field.type.to_pandas_dtype(), copy=False), field.type, mask)
            arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: a descs_array chunk's tuple, in this order (the last item: its number of descriptors)
_DESCS_CHUNK = ("xfer", "op", "src_agent", "dst_agent", "src_addr", "dst_addr", "nbytes", "src_device",
                "dst_device", "src_dlist", "src_idx", "dst_dlist", "dst_idx")


def _descs_batch(chunks: list[tuple]) -> pa.RecordBatch:
    """The descs batch of many descs_array chunks: the same batch _concat_arrays makes of
    the equivalent dicts (tests/tracer/test_recorder_descs.py), with the columns taken
    apart in one ``zip`` and each filled by one concatenation, not per chunk and field."""
    cols = dict(zip(_DESCS_CHUNK, zip(*chunks)))
    lens = np.fromiter((c[-1] for c in chunks), dtype=np.int64, count=len(chunks))
    total = int(lens.sum())
    expand = np.repeat(np.arange(len(chunks)), lens)
    arrays = []
    for field in _DESCS_WIRE:
        name = field.name
        if name == "pos":
            starts = np.repeat(np.cumsum(lens) - lens, lens)
            arrays.append(np_arrow((np.arange(total, dtype=np.int64) - starts).astype(np.int32), field.type))
            continue
        vals = cols[name]
        if name in ("xfer", "src_dlist", "dst_dlist", "op", "src_agent", "dst_agent"):
            arrays.append(_scalar_column(vals, field, expand))
            continue
        dtype = field.type.to_pandas_dtype()
        if _Take is not None and name in _TAKE_COLUMNS:
            # the C tap's prepped postings keep their indices and addresses ungathered (Take):
            # gathered here, the whole column in one pass when every posting's is one
            data = np.empty(total, dtype)
            if _c_rows.take_into(vals, data):
                arrays.append(np_arrow(data, field.type))
                continue
            vals = [_took(v, dtype) if type(v) is _Take else v for v in vals]
        nulls = [v is None for v in vals]
        if all(nulls):
            arrays.append(pa.nulls(total, field.type))
            continue
        shared = [v is not None and v.ndim == 0 for v in vals]
        if all(shared):      # one value per posting (the tap's sizes and devices of a uniform list)
            data = np.repeat(np.array(vals, dtype), lens)
        elif any(nulls) or any(shared):   # nulls are 0 under the mask, shared values filled in
            data = np.zeros(total, dtype)
            ends = np.cumsum(lens).tolist()
            for v, e, k in zip(vals, ends, lens.tolist()):
                if v is not None:
                    data[e - k:e] = v
        else:
            data = np.concatenate(vals).astype(dtype, copy=False)
        mask = np.repeat(np.asarray(nulls, dtype=bool), lens) if any(nulls) else None
        arrays.append(np_arrow(data, field.type, mask))
    return pa.RecordBatch.from_arrays(arrays, schema=_DESCS_WIRE)


#: the descs columns a chunk may hold as a Take (tracer/_rows.c): gathered by _descs_batch
_TAKE_COLUMNS = frozenset(("src_addr", "dst_addr", "src_idx", "dst_idx"))
_Take = getattr(_c_rows, "Take", None)


def _took(v, dtype) -> np.ndarray:
    """One posting's Take column as the array the Python tap records there."""
    out = np.empty(len(v), dtype)
    _c_rows.take_into((v,), out)
    return out


def _scalar_column(vals, field: pa.Field, expand: np.ndarray) -> pa.Array:
    """One value per chunk (None: null) expanded to its rows (names as a dictionary column:
    each distinct one stored once)."""
    if all(v is None for v in vals):
        return pa.nulls(len(expand), field.type)
    if pa.types.is_dictionary(field.type):  # names: store each distinct one once
        uniq = [v for v in dict.fromkeys(vals) if v is not None]
        pos = {v: i for i, v in enumerate(uniq)}
        codes = np.fromiter((pos.get(v, -1) for v in vals), dtype=np.int32, count=len(vals))[expand]
        mask = codes < 0
        idx = np_arrow(np.maximum(codes, 0), pa.int32(), mask)
        return pa.DictionaryArray.from_arrays(idx, pa.array(uniq, pa.string()))
    return pa.array(vals, type=field.type).take(np_arrow(expand, pa.int64()))


_CONVERT = {
    "descs": _descs_batch,
    "dlists": lambda c: _concat_arrays(c, _DLISTS_WIRE),
    "layouts": lambda c: pa.RecordBatch.from_pylist(c, schema=LAYOUTS),
    "events": _events_batch,
}
