"""Host side of the Triton kernels: views, offsets, grids, and finishing the reductions.

Inputs arrive bounds-checked from ``api.py`` as flat uint8 torch views and int64 numpy
arrays. Word (int32) views are used when every offset and size allows them, else the
byte variants run; both give the same bits.
"""
from __future__ import annotations

import numpy as np
import torch

from . import _cpu
from ._triton import build
from .provenance import Provenance

# elements per block and blocks per program; the interpreter gets small blocks so tests
# cover chunk splitting at small sizes and stay fast. Compiled tiles come from
# bench/sweep_kernel_tiles.py on an H200 (bench/results/gpu-h200.md): copy and fill are
# memory bound and like 512-wide blocks with 8 per program, the hash likes 4.
CONFIG = {False: dict(BLOCK=512, ITERS=8, num_warps=4), True: dict(BLOCK=64, ITERS=2, num_warps=1)}
HASH_ITERS = 4
MAX_SLOT_BYTES = (1 << 31) - 4   # the hash kernel indexes a slot's words in int32
_MAX_GRID_Y = 65535


def _dev(a: np.ndarray, like: torch.Tensor, queued: bool = False) -> torch.Tensor:
    """``a`` on ``like``'s device. ``queued``: through pinned host memory, so the copy is
    queued on the stream instead of making the host wait for the work queued before it (a
    copy from pageable memory does)."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    if queued and like.is_cuda:
        return t.pin_memory().to(like.device, non_blocking=True)
    return t.to(like.device)


def _words(u8: torch.Tensor) -> torch.Tensor | None:
    """An int32 view of a uint8 view, or None when its address or length forbid one."""
    if u8.data_ptr() % 4 or u8.numel() < 4:
        return None
    try:
        return u8[: u8.numel() // 4 * 4].view(torch.int32)
    except RuntimeError:
        return None


def tile(interpret: bool, units: int, iters: int | None = None) -> dict:
    """BLOCK, ITERS and num_warps for ranges of at most ``units`` elements. Compiled kernels
    shrink a program to the longest range, so small pages run no fully masked iterations
    (4 KiB pages ran at a third of the copy bandwidth before); the interpreter keeps its
    small fixed tiles so the tests split ranges into several chunks."""
    cfg = dict(CONFIG[interpret])
    if not interpret:
        cfg["ITERS"] = iters or cfg["ITERS"]
        while cfg["ITERS"] > 1 and cfg["BLOCK"] * cfg["ITERS"] // 2 >= units:
            cfg["ITERS"] //= 2
        while cfg["BLOCK"] > 256 and cfg["BLOCK"] // 2 >= units:
            cfg["BLOCK"] //= 2
    return cfg


def _grid_y(units: int, per_program: int) -> tuple[int, int]:
    """(programs along y, iterations) so that y stays under CUDA's grid limit."""
    iters = 1
    while -(-units // (per_program * iters)) > _MAX_GRID_Y:
        iters *= 2
    return max(1, -(-units // (per_program * iters))), iters


def plan_checksum(views: list[torch.Tensor], reg, off, n, interpret: bool, cfg: dict | None = None,
                  queued: bool = False):
    """A launcher for kvh64 of these slots: each call runs the kernel and returns the
    (lo, hi) sums as int64 device tensors (no host sync), so benchmarks can time it alone.
    ``cfg`` overrides the tile (bench/sweep_kernel_tiles.py); ``queued``: the slots' offsets
    go up without the host waiting for the stream (see _dev)."""
    if n.max() > MAX_SLOT_BYTES:
        raise ValueError(f"checksum: a slot of {int(n.max())} bytes (the kernel takes slots under 2 GiB)")
    anchor = views[0]
    ptrs = np.array([v.data_ptr() for v in views], dtype=np.int64)
    delta = ptrs[reg] - ptrs[0] + off
    a32 = _words(anchor)
    aligned = a32 is not None and not (delta % 4).any() and not (n % 4).any()
    d_t = _dev(delta // 4 if aligned else delta, anchor, queued)
    n_t = _dev(n, anchor, queued)
    words = int(((n.max() + 3) // 4))
    cfg = cfg or tile(interpret, words, HASH_ITERS)
    hint = 4 if aligned and not (delta % 16).any() else 1
    split, mult = _grid_y(words, cfg["BLOCK"] * cfg["ITERS"])
    # every slot exactly split chunks long (equal power-of-two pages): no masks needed
    full = bool(aligned and n.min() == n.max() and words == split * cfg["BLOCK"] * cfg["ITERS"] * mult)
    lo = torch.empty(len(off) * split, dtype=torch.int32, device=anchor.device)
    hi = torch.empty_like(lo)
    kernel = build(interpret).kvh64[(len(off), split)]
    mask = 0xFFFFFFFF

    def launch():
        kernel(anchor, a32 if aligned else anchor, d_t, n_t, lo, hi, split, BLOCK=cfg["BLOCK"],
               ITERS=cfg["ITERS"] * mult, ALIGNED=aligned, HINT=hint, FULL=full, num_warps=cfg["num_warps"])
        return (((lo.view(-1, split).to(torch.int64) & mask).sum(1) + n_t) & mask,
                (hi.view(-1, split).to(torch.int64) & mask).sum(1) & mask)
    return launch


def checksum(views: list[torch.Tensor], reg, off, n, interpret: bool) -> np.ndarray:
    if len(off) == 0:
        return np.zeros(0, np.uint64)
    lo, hi = plan_checksum(views, reg, off, n, interpret)()
    return _sums(lo.cpu().numpy(), hi.cpu().numpy())


def checksum_later(views: list[torch.Tensor], reg, off, n, interpret: bool):
    """Queue the hash and the copy of its sums into pinned host memory on the current
    stream of the memory's device; return a function that waits for that copy (the wait
    gives the GIL away) and gives the sums. The interpreter has nothing to overlap."""
    if len(off) == 0 or interpret or not views[0].is_cuda:
        sums = checksum(views, reg, off, n, interpret)
        return lambda: sums
    lo, hi = plan_checksum(views, reg, off, n, interpret, queued=True)()
    both = torch.stack((lo, hi))
    host = torch.empty(both.shape, dtype=both.dtype, pin_memory=True)
    host.copy_(both, non_blocking=True)
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(both.device))

    def result() -> np.ndarray:
        ready.synchronize()
        h = host.numpy()
        return _sums(h[0], h[1])
    return result


def _sums(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)


def _dst_overlap(do, n) -> bool:
    """Do any two of these non-empty destination ranges intersect?"""
    page = int(n[0])
    pow2 = page & (page - 1) == 0      # int64 division is slow; page sizes are powers of 2
    if (n == page).all() and not (do & (page - 1) if pow2 else do % page).any():
        # whole pages of one size (the KV case): a page-index histogram, linear time
        slot = do >> (page.bit_length() - 1) if pow2 else do // page
        lo, span = int(slot.min()), int(slot.max() - slot.min()) + 1
        if span <= 8 * len(slot):
            return bool((np.bincount(slot - lo, minlength=span) > 1).any())
    # non-empty intervals are pairwise disjoint iff, with starts and ends sorted each on
    # its own, every start is at or past the previous end (two sorts, no argsort)
    ds, de = np.sort(do), np.sort(do + n)
    return bool((ds[1:] < de[:-1]).any())


def _overlapping(so, do, n, same: bool) -> bool:
    """Would running the ranges at once differ from running them in order?"""
    if len(n) and n.min() <= 0:     # empty ranges touch nothing
        k = n > 0
        so, do, n = so[k], do[k], n[k]
    if len(do) > 1 and _dst_overlap(do, n):
        return True
    if not same or len(so) == 0:
        return False
    # does any destination intersect any source? (sources may overlap each other freely)
    s_order = np.argsort(so)
    ss, se = so[s_order], np.maximum.accumulate((so + n)[s_order])
    i = np.searchsorted(ss, do + n, side="left")  # sources starting before each dst end
    return bool(((i > 0) & (se[np.maximum(i - 1, 0)] > do)).any())


def plan_copy(sv: torch.Tensor, dv: torch.Tensor, so, do, n, interpret: bool, cfg: dict | None = None):
    """A launcher for these ranges (device offsets staged once); calling it copies.
    ``cfg`` overrides the tile (bench/sweep_kernel_tiles.py)."""
    same = sv.untyped_storage().data_ptr() == dv.untyped_storage().data_ptr()
    if _overlapping(so, do, n, same):
        def in_order():
            for a, b, k in zip(so.tolist(), do.tolist(), n.tolist()):
                if k:  # in order, through a temporary: exactly numpy's slice semantics
                    dv[b:b + k].copy_(sv[a:a + k].clone())
        return in_order
    s32, d32 = _words(sv), _words(dv)
    word_ok = (s32 is not None and d32 is not None) & (so % 4 == 0) & (do % 4 == 0) & (n % 4 == 0)
    launches = []
    for sel, words in ((np.nonzero(word_ok)[0], True), (np.nonzero(~word_ok)[0], False)):
        if len(sel) == 0 or not n[sel].any():
            continue
        unit = 4 if words else 1
        a, b, k = so[sel] // unit, do[sel] // unit, n[sel] // unit
        c = cfg or tile(interpret, int(k.max()))
        hint = 4 if words and not ((a % 4).any() or (b % 4).any()) else 1
        split, mult = _grid_y(int(k.max()), c["BLOCK"] * c["ITERS"])
        args = (s32 if words else sv, d32 if words else dv, _dev(a, dv), _dev(b, dv), _dev(k, dv))
        launches.append((build(interpret).copy[(len(k), split)], args,
                         dict(BLOCK=c["BLOCK"], ITERS=c["ITERS"] * mult, HINT=hint, num_warps=c["num_warps"])))

    def run():
        for kernel, args, kw in launches:
            kernel(*args, **kw)
    return run


def copy(sv: torch.Tensor, dv: torch.Tensor, so, do, n, interpret: bool) -> None:
    plan_copy(sv, dv, so, do, n, interpret)()


def fill(dv: torch.Tensor, off, n, w0, w1, w2, kind, interpret: bool) -> None:
    if len(off) == 0 or not n.any():
        return
    d32 = _words(dv)
    aligned = d32 is not None and not (off % 4).any() and not (n % 4).any()
    units = int((n.max() + 3) // 4) if aligned else int(n.max())
    cfg = tile(interpret, units)
    split, mult = _grid_y(units, cfg["BLOCK"] * cfg["ITERS"])
    i32 = lambda a: _dev(a.astype(np.uint32).view(np.int32), dv)  # noqa: E731
    build(interpret).fill[(len(off), split)](
        dv, d32 if aligned else dv, _dev(off // 4 if aligned else off, dv), _dev(n, dv),
        i32(w0), i32(w1), i32(w2), _dev(kind, dv),
        BLOCK=cfg["BLOCK"], ITERS=cfg["ITERS"] * mult, ALIGNED=aligned, num_warps=cfg["num_warps"])


def decode(dv: torch.Tensor, off, n, interpret: bool) -> list[Provenance]:
    """Counts on the device; a page without a strict majority is decoded on the host, so
    the answer always equals provenance.decode's."""
    d32 = _words(dv)
    out: list[Provenance | None] = [None] * len(off)
    ng = n // 16
    fast = np.nonzero((ng > 0) & (off % 4 == 0))[0] if d32 is not None else np.zeros(0, np.int64)
    if len(fast):
        cfg = CONFIG[interpret]
        dw, g = off[fast] // 4, ng[fast]
        pick = np.stack([np.zeros_like(g), g // 2, g - 1], 1)           # candidate groups
        idx = dw[:, None, None] + pick[:, :, None] * 4 + np.arange(3)[None, None, :]
        cand = d32[_dev(idx.reshape(-1), dv)].contiguous()
        split, _ = _grid_y(int(g.max()), cfg["BLOCK"])
        cnt = torch.zeros(len(fast) * split * 5, dtype=torch.int32, device=dv.device)
        build(interpret).decode[(len(fast), split)](
            d32, _dev(dw, dv), _dev(g, dv), cand, cnt, split, BLOCK=cfg["BLOCK"],
            num_warps=cfg["num_warps"])
        cnt = cnt.view(len(fast), split, 5).sum(1).cpu().numpy()
        cw = cand.view(-1, 3, 3).cpu().numpy().view(np.uint32)
        for j, p in enumerate(fast.tolist()):
            groups = int(g[j])
            if 2 * cnt[j, 0] > groups:
                out[p] = Provenance("poison", agree=float(cnt[j, 0]) / groups)
                continue
            k = int(np.argmax(cnt[j, 1:4]))
            if 2 * cnt[j, 1 + k] > groups:   # a strict majority is the mode decode() finds
                w0, w1, w2 = (int(x) for x in cw[j, k])
                out[p] = Provenance("data", w0, w1 >> 24, w1 & 0xFFFFFF, w2,
                                    float(cnt[j, 1 + k]) / groups, bool(cnt[j, 4] == 0))
    rest = [i for i, p in enumerate(out) if p is None]
    if rest:
        host = {i: dv[off[i]: off[i] + n[i]].cpu().numpy() for i in rest}
        for i in rest:
            out[i] = _cpu.decode_many(host[i], np.zeros(1, np.int64), n[i:i + 1])[0]
    return out
