"""Pool geometry: what each side's KV memory looks like, sized from a token budget.

Per side, four pools (SGLang's kv_data / state / aux split):

- ``kv``: MLA latent cache, bf16, one region per layer; item_len = kv_dim*2 bytes/token
  times the page size.
- ``index_k``: the sparse-attention indexer keys, one region per layer, its own page
  size. fp8 pages hold ``page*head_dim`` fp8 values then ``page*head_dim/quant_block``
  fp32 scales; bf16 pages hold ``page*head_dim`` bf16 values (twice the data bytes).
- ``state``: one slot per request (think mamba/compression state), its own slot count.
- ``aux``: one metadata slot per request in host DRAM.

``kv`` and ``index_k`` regions travel through the prepped kv_data lists (region-major,
kv layers then index_k layers); ``state`` and ``aux`` have their own lists and tags.

Slot counts follow from the budget: with ``index_k_sizing = "tokens"`` every pool holds
the same number of tokens, so kv and index_k differ in slot count only when their page
sizes differ; with ``"bytes"`` index_k gets as many bytes per layer as kv, so its slot
count depends on its bytes per token -- on the dtype. ``"fp8-bytes"`` is SGLang's
indexer pool: its buffer is sized in bytes for the token budget at the fp8 layout (132
bytes per token for head_dim 128), whatever the dtype. fp8 pages then fill it with the
token budget's page count (kv's, at equal page sizes); bf16 pages, twice the data, fit
about half as many -- the geometry where a bf16 index-K differs from kv.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PoolSpec:
    """One pool of one side: ``layers`` regions of ``num_slots`` slots of ``item_len`` bytes."""
    name: str
    layers: int
    page_tokens: int
    token_bytes: int          # bytes of one token of one layer (item_len / page_tokens)
    num_slots: int
    dtype: str
    mem_type: str             # "VRAM" (device memory) or "DRAM" (aux always)
    prepped_kv: bool          # travels in the kv_data prepped lists

    @property
    def item_len(self) -> int:
        return self.page_tokens * self.token_bytes

    @property
    def region_bytes(self) -> int:
        return self.item_len * self.num_slots


def index_k_token_bytes(dtype: str, head_dim: int, quant_block: int) -> int:
    """Bytes per token of the indexer keys: fp8 data + fp32 scales, or bf16 data."""
    if dtype == "fp8":
        return head_dim + head_dim // quant_block * 4
    return head_dim * 2


def side_pools(wl, side: str) -> list[PoolSpec]:
    """The pools of ``side`` ("prefill" | "decode") for workload ``wl``."""
    g = wl.geometry
    budget = int(g["decode_tokens"] if side == "decode" else g["prefill_tokens"])
    vram = "VRAM"
    kv_tb = int(g["kv_dim"]) * 2
    kv_slots = budget // int(g["kv_page_tokens"])
    kv = PoolSpec("kv", int(g["layers"]), int(g["kv_page_tokens"]), kv_tb, kv_slots, "bf16", vram, True)
    ik_tb = index_k_token_bytes(wl.index_k, int(g["index_head_dim"]), int(g["quant_block"]))
    ik_pt = int(g["index_k_page_tokens"])
    if g["index_k_sizing"] == "bytes":
        ik_slots = kv.region_bytes // (ik_pt * ik_tb)
    elif g["index_k_sizing"] == "fp8-bytes":
        fp8_tb = index_k_token_bytes("fp8", int(g["index_head_dim"]), int(g["quant_block"]))
        ik_slots = budget * fp8_tb // (ik_pt * ik_tb)
    else:
        ik_slots = budget // ik_pt
    ik = PoolSpec("index_k", int(g["layers"]), ik_pt, ik_tb, ik_slots,
                  "fp8_e4m3+scales" if wl.index_k == "fp8" else "bf16", vram, True)
    st = PoolSpec("state", 1, 1, int(g["state_bytes"]), int(g["state_slots"]), "bf16", vram, False)
    aux = PoolSpec("aux", 1, 1, int(g["aux_bytes"]), int(g["state_slots"]), "bytes", "DRAM", False)
    return [kv, ik, st, aux]


def pages_for(tokens: int, page_tokens: int) -> int:
    """Pages holding ``tokens`` tokens (the last one partly filled)."""
    return -(-tokens // page_tokens)


def used_tokens(tokens: int, page_tokens: int, page: int) -> int:
    """Tokens held by page ``page`` of a ``tokens``-long sequence."""
    return max(0, min(page_tokens, tokens - page * page_tokens))


def impossible_bugs(wl) -> dict[str, str]:
    """Injectable bugs that this workload's geometry keeps from corrupting anything, with
    why, so ``record --inject`` can say so instead of recording a clean run in silence."""
    out = {}
    # uniform-slot-count offsets kv_data region r by r * (region 0's slot count): right as
    # long as every region before the last has region 0's count, on both sides.
    uniform = []
    for side in ("prefill", "decode"):
        counts = [p.num_slots for p in side_pools(wl, side) if p.prepped_kv for _ in range(p.layers)]
        uniform.append(all(c == counts[0] for c in counts[:-1]))
        if side == "decode":
            slots = [(p.name, p.num_slots) for p in side_pools(wl, side) if p.prepped_kv]
    if all(uniform):
        shown = ", ".join(f"{n} {c}" for n, c in slots)
        out["uniform-slot-count"] = (f"every kv_data region has the same slot count ({shown} slots per layer), "
                                     f"so a uniform slot count addresses them all correctly")
    # abort-free-inflight frees an aborted request's pages early: nothing to free without aborts
    if float(wl.abort_rate) <= 0 and float(wl.timeout_rate) <= 0:
        out["abort-free-inflight"] = "the workload aborts no request (abort_rate and timeout_rate are 0)"
    return out
