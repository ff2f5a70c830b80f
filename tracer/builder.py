"""Trace builder: a small scripted API that writes valid traces through the real Recorder.

For tests and examples — analysis, replay and TUI scenarios written by hand::

    b = TraceBuilder("t.kvtrace")
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    d.alloc("r1", "kv", [5, 6]); p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv_0_1_0")
    d.notif_recv(p, b"r1_kv_0_1_0"); p.done(x); d.read("r1", "kv", [5, 6])
    b.close()

Content is modelled so that default checksums are right: ``write`` stores the provenance
bytes' kvh64 of each (request, pool, layer, page); a transfer copies modelled content at
post (``deliver="post"``) or when told (``x.deliver()``); ``read`` reports what the model
holds unless explicit checksums are given. Each agent gets its own shard by default.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from ..kernels.checksum import kvh64
from ..kernels.provenance import fill_page, poison
from . import manifest as _manifest
from .recorder import Recorder
from .schema import EventKind

_BASES = {}


@dataclasses.dataclass
class Pool:
    name: str
    layers: int
    slot_bytes: int
    num_slots: int
    base: int                 # address of layer 0, slot 0; layer l at base + l * layer_stride
    page_tokens: int
    dtype: str
    #: per layer (slot_bytes, page_tokens, dtype) where layers differ (NAS-pruned models with
    #: a KV-head count per layer, hybrid layer groups); None: every layer as the pool's fields
    per_layer: tuple | None = None

    @property
    def layer_stride(self) -> int:
        """Bytes of one layer region (of layer 0 when layers differ)."""
        return self.layer_bytes(0)

    def geometry(self, layer: int) -> tuple[int, int, str]:
        """(slot_bytes, page_tokens, dtype) of ``layer``."""
        return self.per_layer[layer] if self.per_layer else (self.slot_bytes, self.page_tokens, self.dtype)

    def slot_bytes_of(self, layer: int) -> int:
        return self.geometry(layer)[0]

    def layer_bytes(self, layer: int) -> int:
        return self.slot_bytes_of(layer) * self.num_slots

    def layer_base(self, layer: int) -> int:
        return self.base + sum(self.layer_bytes(k) for k in range(layer))

    def addr(self, layer: int, slot: int) -> int:
        return self.layer_base(layer) + slot * self.slot_bytes_of(layer)


class Xfer:
    """A posted transfer of the builder; ``deliver()`` applies its modelled data movement."""

    def __init__(self, side: "AgentBuilder", xid: int, moves: list):
        self.side, self.id, self.moves, self.delivered = side, xid, moves, False

    def deliver(self) -> None:
        if not self.delivered:
            content = self.side.builder.content
            for src_key, dst_key in self.moves:
                content[dst_key] = content.get(src_key)
            self.delivered = True

    def __int__(self) -> int:
        return self.id


class AgentBuilder:
    """One agent (and by default one shard) of a built trace."""

    def __init__(self, builder: "TraceBuilder", name: str, rec: Recorder):
        self.builder, self.name, self.rec = builder, name, rec
        self.pools: dict[str, Pool] = {}
        self._next_base = 0x10000000 * (len(builder.agents) + 1)
        self.pages: dict[tuple[str, str, int], int] = {}   # (request, pool, slot) -> page

    # -- memory ---------------------------------------------------------------
    def pool(self, name: str, *, layers: int = 1, slot_bytes: int = 64, num_slots: int = 16,
             page_tokens: int = 16, dtype: str = "bf16", register: bool = True, base: int | None = None,
             layer_geometry: dict | None = None) -> Pool:
        """Declare a pool: one region per layer, registered with NIXL and described in layouts.
        ``layer_geometry`` maps a layer to its own ``(slot_bytes, page_tokens, dtype)``
        (layers not in it take the pool's); regions lie back to back."""
        base = self._next_base if base is None else base
        per_layer = None
        if layer_geometry:
            per_layer = tuple(tuple(layer_geometry.get(k, (slot_bytes, page_tokens, dtype))) for k in range(layers))
        p = Pool(name, layers, slot_bytes, num_slots, base, page_tokens, dtype, per_layer)
        self._next_base = p.layer_base(layers) + 0x100000
        self.pools[name] = p
        for layer in range(layers):
            sb, pt, dt = p.geometry(layer)
            self.rec.layout(self.name, name, layer, p.addr(layer, 0), sb, num_slots, page_tokens=pt, dtype=dt)
            if register:
                self.rec.event(EventKind.REGISTER, self.name, addr=p.addr(layer, 0), nbytes=p.layer_bytes(layer),
                               mem_type="DRAM", device=0, detail={"pool": name, "layer": layer})
        return p

    def register(self, addr: int, nbytes: int, mem_type: str = "DRAM", device: int = 0) -> int:
        return self.rec.event(EventKind.REGISTER, self.name, addr=addr, nbytes=nbytes, mem_type=mem_type, device=device)

    def deregister(self, addr: int, nbytes: int, mem_type: str = "DRAM", device: int = 0) -> int:
        return self.rec.event(EventKind.DEREGISTER, self.name, addr=addr, nbytes=nbytes, mem_type=mem_type, device=device)

    def prep_dlist(self, pool_names: Sequence[str], remote: "AgentBuilder | None" = None,
                   num_slots: int | None = None) -> int:
        """A prepped list over ``pool_names``' regions (of ``remote`` if given), entry
        ``r * M + s`` for region r and slot s (M = each region's own slot count unless
        ``num_slots`` forces one). Returns the dlist id."""
        owner = remote or self
        addrs, sizes = [], []
        for pname in pool_names:
            p = owner.pools[pname]
            for layer in range(p.layers):
                for s in range(num_slots or p.num_slots):
                    addrs.append(p.addr(layer, s))
                    sizes.append(p.slot_bytes_of(layer))
        dl = self.rec.new_dlist_id()
        self.rec.dlist_array(dl, owner.name, remote.name if remote else None, addrs, np.asarray(sizes), mem_type="DRAM")
        return dl

    # -- requests and slots ----------------------------------------------------
    def req_start(self, request: str, **detail) -> int:
        return self.rec.event(EventKind.REQ_START, self.name, request, detail=detail or None)

    def req_done(self, request: str) -> int:
        return self.rec.event(EventKind.REQ_DONE, self.name, request)

    def req_abort(self, request: str, reason: str = "abort") -> int:
        return self.rec.event(EventKind.REQ_ABORT, self.name, request, detail={"reason": reason})

    def alloc(self, request: str, pool: str, slots: Sequence[int], pages: Sequence[int] | None = None,
              shared: bool = False) -> int:
        pages = list(pages) if pages is not None else list(range(len(slots)))
        for s, pg in zip(slots, pages):
            self.pages[(request, pool, s)] = pg
        return self.rec.alloc(self.name, request, pool, slots, pages, shared=shared)

    def free(self, request: str, pool: str, slots: Sequence[int], reason: str | None = None) -> int:
        return self.rec.free(self.name, request, pool, slots, reason=reason)

    def _content_of(self, request: str, pool: str, layer: int, page: int) -> int:
        return kvh64(fill_page(request, pool, layer, page, self.pools[pool].slot_bytes_of(layer)))

    def write(self, request: str, pool: str, slots: Sequence[int], layers: Sequence[int] | None = None,
              pages: Sequence[int] | None = None, checksums: Sequence[int] | None = None,
              src_request: str | None = None) -> list[int]:
        """The producer fills slots (every layer unless ``layers``); one event per layer."""
        seqs = []
        for layer in (layers if layers is not None else range(self.pools[pool].layers)):
            pg = list(pages) if pages is not None else [self.pages.get((request, pool, s), i) for i, s in enumerate(slots)]
            owner = src_request or request
            cs = list(checksums) if checksums is not None else [self._content_of(owner, pool, layer, p) for p in pg]
            for s, c in zip(slots, cs):
                self.builder.content[(self.name, pool, layer, s)] = c
            seqs.append(self.rec.write(self.name, request, pool, layer, slots, cs, pg,
                                       detail={"src_request": src_request} if src_request else None))
        return seqs

    def read(self, request: str, pool: str, slots: Sequence[int], layers: Sequence[int] | None = None,
             checksums: Sequence[int] | None = None) -> list[int]:
        """The consumer uses slots; checksums default to what the content model holds."""
        seqs = []
        for layer in (layers if layers is not None else range(self.pools[pool].layers)):
            unwritten = kvh64(poison(self.pools[pool].slot_bytes_of(layer))[0])
            pg = [self.pages.get((request, pool, s), i) for i, s in enumerate(slots)]
            cs = list(checksums) if checksums is not None else [
                self.builder.content.get((self.name, pool, layer, s)) or unwritten for s in slots]
            seqs.append(self.rec.read(self.name, request, pool, layer, slots, cs, pg))
        return seqs

    # -- transfers -------------------------------------------------------------
    def post(self, request: str, peer: "AgentBuilder", *, src: tuple | None = None, dst: tuple | None = None,
             layers: Sequence[int] | None = None, op: str = "WRITE", msg: bytes | None = None,
             descs: Sequence[tuple[int, int, int]] | None = None, deliver: str = "post",
             src_dlist: int | None = None, src_idx: Sequence[int] | None = None,
             dst_dlist: int | None = None, dst_idx: Sequence[int] | None = None) -> Xfer:
        """Post a transfer initiated by this agent with ``peer``.

        WRITE: bytes move from this agent's ``src`` to the peer's ``dst``; READ: from the
        peer's ``src`` to this agent's ``dst``. ``src``/``dst`` are ``(pool, slots)``, or
        ``(pool, slots, layers)``; ``descs`` gives raw ``(src_addr, dst_addr, nbytes)``
        instead. Slot-level posts expand to one descriptor per (layer, slot).
        ``deliver="post"`` moves modelled content now; ``"later"`` waits for ``deliver()``.
        """
        src_side, dst_side = (self, peer) if op == "WRITE" else (peer, self)
        moves = []
        if descs is None:
            spool, sslots = src[0], list(src[1])
            dpool, dslots = dst[0], list(dst[1])
            lay = list(src[2]) if len(src) > 2 else (list(layers) if layers is not None
                                                     else list(range(src_side.pools[spool].layers)))
            dlay = list(dst[2]) if len(dst) > 2 else lay
            descs = []
            for ls, ld in zip(lay, dlay):
                for a, b in zip(sslots, dslots):
                    sp, dp = src_side.pools[spool], dst_side.pools[dpool]
                    descs.append((sp.addr(ls, a), dp.addr(ld, b), min(sp.slot_bytes_of(ls), dp.slot_bytes_of(ld))))
                    moves.append(((src_side.name, spool, ls, a), (dst_side.name, dpool, ld, b)))
        else:
            moves = self.builder._moves_for(src_side, dst_side, descs)
        xid = self.rec.new_xfer_id()
        arr = np.asarray(descs, dtype=np.uint64).reshape(-1, 3)
        self.rec.descs_array(xid, op, src_side.name, dst_side.name, arr[:, 0], arr[:, 1], arr[:, 2],
                             src_dlist=src_dlist, src_idx=src_idx, dst_dlist=dst_dlist, dst_idx=dst_idx)
        self.rec.event(EventKind.XFER_POST, self.name, request, xfer=xid, peer=peer.name,
                       nbytes=int(arr[:, 2].sum()), msg=msg, status="PROC", detail={"op": op, "descs": len(arr)})
        x = Xfer(self, xid, moves)
        if deliver == "post":
            x.deliver()
        return x

    def done(self, x: Xfer | int, request: str | None = None) -> int:
        xid = int(x)
        if isinstance(x, Xfer):
            x.deliver()
        return self.rec.event(EventKind.XFER_DONE, self.name, request, xfer=xid, status="DONE")

    def error(self, x: Xfer | int, request: str | None = None) -> int:
        return self.rec.event(EventKind.XFER_ERROR, self.name, request, xfer=int(x), status="ERR")

    def release(self, x: Xfer | int, request: str | None = None) -> int:
        return self.rec.event(EventKind.XFER_RELEASE, self.name, request, xfer=int(x))

    def notif_send(self, peer: "AgentBuilder", msg: bytes, request: str | None = None) -> int:
        return self.rec.event(EventKind.NOTIF_SEND, self.name, request, peer=peer.name, msg=msg)

    def notif_recv(self, peer: "AgentBuilder", msg: bytes, request: str | None = None) -> int:
        return self.rec.event(EventKind.NOTIF_RECV, self.name, request, peer=peer.name, msg=msg)

    def msg_send(self, peer: "AgentBuilder", mid: str, body: bytes = b"", request: str | None = None) -> int:
        return self.rec.event(EventKind.MSG_SEND, self.name, request, peer=peer.name, msg=body, detail={"id": mid})

    def msg_recv(self, peer: "AgentBuilder", mid: str, body: bytes = b"", request: str | None = None) -> int:
        return self.rec.event(EventKind.MSG_RECV, self.name, request, peer=peer.name, msg=body, detail={"id": mid})

    def mark(self, text: str) -> int:
        return self.rec.mark(text, self.name)


class TraceBuilder:
    """Builds a trace directory; one Recorder per shard, all in this process."""

    def __init__(self, path: str, **manifest_fields):
        self.path = os.fspath(path)
        self.agents: dict[str, AgentBuilder] = {}
        self.recorders: dict[str, Recorder] = {}
        self.content: dict[tuple, int | None] = {}   # (agent, pool, layer, slot) -> modelled kvh64
        _manifest.update(self.path, tool="kvtrace.builder", **manifest_fields)

    def agent(self, name: str, shard: str | None = None) -> AgentBuilder:
        shard = shard or name
        if shard not in self.recorders:
            self.recorders[shard] = Recorder(self.path, shard, flush_interval=3600)
        a = AgentBuilder(self, name, self.recorders[shard])
        self.agents[name] = a
        return a

    def _moves_for(self, src: AgentBuilder, dst: AgentBuilder, descs) -> list:
        """The modelled content a list of raw descriptors moves: the slot each starts at;
        a coalesced run (whole slots back to back on both sides, one descriptor) moves each
        of its slots, as far as both layers reach."""
        def locate(side, addr):
            for p in side.pools.values():
                for layer in range(p.layers):
                    rest = addr - p.layer_base(layer)
                    if 0 <= rest < p.layer_bytes(layer):
                        slot, inner = divmod(rest, p.slot_bytes_of(layer))
                        if inner == 0:
                            return (side.name, p.name, layer, slot), p.slot_bytes_of(layer), p.num_slots
            return None
        moves = []
        for s, d, n in descs:
            a, b = locate(src, s), locate(dst, d)
            if not (a and b):
                continue
            (ak, a_bytes, a_slots), (bk, b_bytes, b_slots) = a, b
            run = n // a_bytes if a_bytes == b_bytes and n > a_bytes and n % a_bytes == 0 else 1
            for k in range(min(run, a_slots - ak[3], b_slots - bk[3])):
                moves.append((ak[:3] + (ak[3] + k,), bk[:3] + (bk[3] + k,)))
        return moves

    def close(self, complete: bool = True) -> str:
        for r in self.recorders.values():
            r.close()
        if complete:
            _manifest.finish(self.path)
        return self.path

    def __enter__(self) -> "TraceBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
