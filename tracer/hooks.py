"""Engine hooks: the few lines a serving engine or allocator adds so a trace knows what
its memory means (layouts), who holds which slots (alloc/free) and what the bytes were
(write/read checksums). See docs/hooks.md for SGLang- and vLLM-shaped examples.

    hooks = KVHooks(agent)                       # agent: a TracedAgent (or its name + recorder)
    hooks.layout("kv", layer, base_ptr, item_len, num_pages, page_tokens=64, dtype="bf16")
    hooks.alloc(room, "kv", pages)               # decode pre-allocates destination pages
    hooks.write(room, "kv", layer, pages, data=kv_layer_tensor)   # producer filled them
    hooks.read(room, "kv", layer, pages, data=kv_layer_tensor)    # consumer used them
    hooks.free(room, "kv", pages, reason="finish")

Every method is a no-op costing one attribute test when the process is not recorded, so
hooks can stay in production code. Checksums are kvh64 (kernels/checksum.py), computed
on the memory's own device by ``kernels.api.checksum_slots`` -- the hash replay uses.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .process_recorder import default_recorder
from .recorder import Recorder
from .schema import EventKind


class KVHooks:
    """Hook API of one agent (one side: prefill or decode).

    Args:
        agent: a TracedAgent (its name and recorder are used) or an agent name.
        recorder: the Recorder; defaults to the agent's, else the ``kvtrace record`` one.
    """

    def __init__(self, agent, recorder: Recorder | None = None):
        self.agent: str = agent if isinstance(agent, str) else agent.name
        rec = recorder or getattr(agent, "kvtrace_recorder", None) or default_recorder()
        #: None when the process is not recorded: every hook returns at once
        self.rec: Recorder | None = rec
        self._geom: dict[tuple[str, int], tuple[int, int]] = {}  # (pool, layer) -> (slot_bytes, num_slots)

    @property
    def enabled(self) -> bool:
        """True when events are recorded."""
        return self.rec is not None

    # ---------------------------------------------------------------- layouts
    def layout(self, pool: str, layer: int, addr: int, slot_bytes: int, num_slots: int, *,
               page_tokens: int = 1, dtype: str = "bytes", part: str | None = None,
               mem_type: str = "DRAM", device: int = 0) -> None:
        """Slot ``s`` of (pool, layer) is ``[addr + s*slot_bytes, +slot_bytes)``.

        A region holding K and V halves is declared twice, with ``part='K'`` and
        ``part='V'`` and each half's own ``addr``.
        """
        if self.rec is None:
            return
        self._geom[(pool, layer)] = (int(slot_bytes), int(num_slots))
        self.rec.layout(self.agent, pool, layer, int(addr), int(slot_bytes), int(num_slots),
                        page_tokens=page_tokens, dtype=dtype, part=part, mem_type=mem_type, device=device)

    def layouts(self, pool: str, ptrs: Sequence[int], lens: Sequence[int], item_lens: Sequence[int], *,
                page_tokens: int = 1, dtype: str = "bytes", mem_type: str = "DRAM", device: int = 0,
                first_layer: int = 0) -> None:
        """SGLang-shaped: parallel lists of region pointers, byte lengths and per-page
        item lengths, one region per layer (slot count = len // item_len, per region)."""
        for i, (p, n, item) in enumerate(zip(ptrs, lens, item_lens)):
            self.layout(pool, first_layer + i, p, item, int(n) // int(item), page_tokens=page_tokens,
                        dtype=dtype, mem_type=mem_type, device=device)

    # ---------------------------------------------------------------- ownership
    def alloc(self, request: str, pool: str, slots: Sequence[int], pages: Sequence[int] | None = None, *,
              shared: bool = False) -> None:
        """Slots of ``pool`` handed to ``request``; ``pages``: their ordinals in the request's
        sequence (default 0..n-1); ``shared``: a prefix-cache reference to held slots."""
        if self.rec is not None:
            self.rec.alloc(self.agent, request, pool, _ints(slots), None if pages is None else _ints(pages),
                           shared=shared)

    def free(self, request: str, pool: str, slots: Sequence[int], *, reason: str | None = None) -> None:
        """Slots taken back from ``request`` (reason: finish, abort, timeout...)."""
        if self.rec is not None:
            self.rec.free(self.agent, request, pool, _ints(slots), reason=reason)

    # ---------------------------------------------------------------- content
    def write(self, request: str, pool: str, layer: int, slots: Sequence[int], *, data=None,
              checksums: Sequence[int] | None = None, pages: Sequence[int] | None = None,
              src_request: str | None = None) -> None:
        """The producer filled slots of (pool, layer). Pass ``data`` (the layer's region as a
        tensor/array; slot s at byte ``s*slot_bytes``) to have kvh64 computed, or ``checksums``."""
        if self.rec is not None:
            cs = self._checksums(pool, layer, slots, data, checksums)
            self.rec.write(self.agent, request, pool, layer, _ints(slots), cs,
                           None if pages is None else _ints(pages),
                           detail={"src_request": src_request} if src_request else None)

    def read(self, request: str, pool: str, layer: int, slots: Sequence[int], *, data=None,
             checksums: Sequence[int] | None = None, pages: Sequence[int] | None = None) -> None:
        """The consumer used slots of (pool, layer); checksums of what it saw (see ``write``)."""
        if self.rec is not None:
            cs = self._checksums(pool, layer, slots, data, checksums)
            self.rec.read(self.agent, request, pool, layer, _ints(slots), cs,
                          None if pages is None else _ints(pages))

    def _checksums(self, pool, layer, slots, data, checksums):
        if checksums is not None:
            return [int(c) for c in checksums]
        if data is None:
            raise ValueError("write/read hooks need data= (the layer's memory) or checksums=")
        geom = self._geom.get((pool, layer))
        if geom is None:
            raise ValueError(f"no layout declared for pool {pool!r} layer {layer}; call layout() first")
        from ..kernels.api import checksum_slots
        s = np.asarray(_ints(slots), dtype=np.int64)
        return checksum_slots(data, s * geom[0], geom[0]).tolist()

    # ---------------------------------------------------------------- lifecycle and messages
    def req_start(self, request: str, *, aliases: Sequence[str] = (), **detail) -> None:
        """The request starts on this side; ``aliases``: the engine's own ids for it."""
        if self.rec is not None:
            d = dict(detail)
            if aliases:
                d["aliases"] = [str(a) for a in aliases]
            self.rec.event(EventKind.REQ_START, self.agent, request, detail=d or None)

    def req_done(self, request: str) -> None:
        """The request finished on this side."""
        if self.rec is not None:
            self.rec.event(EventKind.REQ_DONE, self.agent, request)

    def req_abort(self, request: str, reason: str = "abort") -> None:
        """The request was aborted (or timed out) on this side."""
        if self.rec is not None:
            self.rec.event(EventKind.REQ_ABORT, self.agent, request, detail={"reason": reason})

    def msg_send(self, request: str | None, peer: str, mid: str, body: bytes = b"") -> None:
        """A control message (e.g. decode -> prefill destination pages); ``mid`` pairs the ends."""
        if self.rec is not None:
            self.rec.event(EventKind.MSG_SEND, self.agent, request, peer=peer, msg=body or None,
                           detail={"id": mid})

    def msg_recv(self, request: str | None, peer: str, mid: str, body: bytes = b"") -> None:
        """The receiving end of ``msg_send`` with the same ``mid``."""
        if self.rec is not None:
            self.rec.event(EventKind.MSG_RECV, self.agent, request, peer=peer, msg=body or None,
                           detail={"id": mid})


def _ints(v) -> list[int]:
    return [int(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]
