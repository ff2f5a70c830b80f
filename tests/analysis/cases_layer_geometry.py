"""Pools whose layers differ in geometry (bytes per slot, page tokens, dtype), as real models
register them: a KV-head count or head size per layer (NAS-pruned Nemotron/DeciLM with
variable GQA, OpenELM), layer groups with their own page size in one pool (vLLM's hybrid
KV cache manager). layout_mismatch compared each agent's min() over a pool's layers, so a
difference on one layer hid behind layers that agree (a missed bug), and the geometry
listed for such a pool was one no layer has. These scenarios send one transfer per layer
(layer-wise push), so a finding can name the transfer of the differing layer.

Every pool here: 4 layers, 8 slots; prefill's slots 4, 5 go to decode's 2, 3."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case

#: per layer (slot_bytes, page_tokens, dtype): two layers of 4 KV heads, one layer group
#: with pages twice as long (same bytes per token), one layer of 2 heads
VARIED = {0: (64, 16, "bf16"), 1: (64, 16, "bf16"), 2: (128, 32, "bf16"), 3: (32, 16, "bf16")}
SRC, DST = [4, 5], [2, 3]


def _pair(path, src_geo, dst_geo):
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side, geo in ((p, src_geo), (d, dst_geo)):
        side.pool("kv", layers=4, num_slots=8, layer_geometry=geo)
    return b, p, d


def _layerwise(b, p, d, item_len=None):
    """r1's pages, one WRITE per layer (descriptors of ``item_len[layer]`` bytes, else the
    smaller slot of the two sides), notifications, reads and the clean tail."""
    d.req_start("r1")
    d.alloc("r1", "kv", DST)
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.alloc("r1", "kv", SRC)
    p.write("r1", "kv", SRC)
    sp, dp = p.pools["kv"], d.pools["kv"]
    xs = []
    for L in range(4):
        n = (item_len or {}).get(L, min(sp.slot_bytes_of(L), dp.slot_bytes_of(L)))
        descs = [(sp.addr(L, s), dp.addr(L, t), n) for s, t in zip(SRC, DST)]
        xs.append(p.post("r1", d, descs=descs, msg=f"r1_kv_L{L}".encode()))
    for L in range(4):
        d.notif_recv(p, f"r1_kv_L{L}".encode(), request="r1")
    d.read("r1", "kv", DST)
    for x in xs:
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", SRC)
    d.free("r1", "kv", DST)
    d.req_done("r1")
    b.close()
    return xs


@case
def legal_per_layer_geometry(path, bug=False):
    """A pool whose layers differ (bytes per slot, page tokens: VARIED), alike on both
    sides: nothing differs between the sides, whatever one geometry of the pool would say.
    (desc_match took one page size per pool: with pages of 16 tokens on one layer and 32
    on another it could compare page 1 of 16 tokens with page 1 of 32 — other tokens.)"""
    _layerwise(*_pair(path, VARIED, VARIED))
    return []


@case
def dtype_differs_on_one_layer(path, bug=True):
    """Decode stores layer 2 as fp8 (a per-layer kv-cache dtype override on one side only),
    prefill as bf16; the other layers agree, and so does each side's min() over its layers
    (min dtype 'bf16', min slot bytes 32 on both), which hid it. Twin: bf16 on both."""
    dst = dict(VARIED)
    if bug:
        dst[2] = (128, 32, "fp8")
    _layerwise(*_pair(path, VARIED, dst))
    return [("layout_mismatch", "decode", "r1", "kv", [])] if bug else []


@case
def bytes_per_token_differs_on_one_layer(path, bug=True):
    """Layer 2 holds twice the bytes per token on decode (it keeps 2x the KV heads there:
    a head split on that layer only), every other layer alike. Twin: prefill's items of
    that layer land inside decode's slots (a head split: consistent). The bug: the
    descriptors of layer 2 take decode's item length and run past prefill's slot. Each
    side's min() over its layers agrees (32 B per slot of 16 tokens), which hid it."""
    dst = dict(VARIED)
    dst[2] = (256, 32, "bf16")
    _layerwise(*_pair(path, VARIED, dst), item_len={2: 256} if bug else None)
    return [("layout_mismatch", "decode", "r1", "kv", [])] if bug else []
