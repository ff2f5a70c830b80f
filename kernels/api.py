"""The kernels' facade: one call per batched operation, Triton on CUDA, numpy otherwise.

Every function takes memory as a tensor or array of any dtype (hashed, copied and filled
as raw bytes; it must be contiguous), byte offsets and byte counts, and picks a backend:

* ``"triton"`` — compiled Triton kernels; the default for CUDA tensors;
* ``"cpu"`` — numpy (``_cpu.py``); the default for numpy arrays, bytearrays and CPU tensors;
* ``"interpret"`` — the Triton kernels under Triton's interpreter, on CPU torch tensors
  (CI uses it to prove the kernels give the CPU path's bits).

``KVTRACE_KERNELS=cpu|triton|interpret`` overrides the default. All backends produce the
same bits; every range is bounds-checked first (``ValueError``), so nothing outside the
given memory is ever read or written.
"""
from __future__ import annotations

import os
import sys
from typing import Sequence

import numpy as np

from . import _cpu
from .provenance import Provenance, pool_tag, request_tag

BACKENDS = ("cpu", "triton", "interpret")


def _torch():
    import torch  # ~1 s import: only when a tensor or a Triton backend is involved
    return torch


def _is_tensor(x) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _backend(x, backend: str | None) -> str:
    b = backend or os.environ.get("KVTRACE_KERNELS") or "auto"
    if b == "auto":
        return "triton" if _is_tensor(x) and x.is_cuda else "cpu"
    if b not in BACKENDS:
        raise ValueError(f"unknown kernel backend {b!r} (one of {', '.join(BACKENDS)})")
    if b != "cpu" and not _is_tensor(x):
        raise ValueError(f"backend {b!r} needs torch tensors")
    if _is_tensor(x) and x.is_cuda != (b == "triton"):
        raise ValueError(f"backend {b!r} cannot run on a {x.device} tensor")
    return b


def bytes_view(x):
    """A flat uint8 view sharing memory with ``x`` (tensor, ndarray, bytearray, memoryview)."""
    if _is_tensor(x):
        if not x.is_contiguous():
            raise ValueError("kernels need contiguous memory")
        return x.reshape(-1).view(_torch().uint8)
    if isinstance(x, np.ndarray):
        if not x.flags.c_contiguous:
            raise ValueError("kernels need contiguous memory")
        return x.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(x).cast("B"), dtype=np.uint8)


def _host(v) -> np.ndarray:
    return v.numpy() if _is_tensor(v) else v


def _ints(v, count: int | None = None) -> np.ndarray:
    a = np.asarray(v, dtype=np.int64).reshape(-1)
    if count is not None and a.size == 1 and count != 1:
        a = np.full(count, a[0], dtype=np.int64)
    return a


def _check(size: int, offsets: np.ndarray, nbytes: np.ndarray, what: str) -> None:
    _check_sized(np.int64(size), offsets, nbytes, what)


def _check_sized(size, offsets: np.ndarray, nbytes: np.ndarray, what: str) -> None:
    """Every range ``[offsets, offsets + nbytes)`` inside ``[0, size)`` (size: one for all,
    or one per range), else ValueError naming the first one outside."""
    if len(offsets) != len(nbytes):
        raise ValueError(f"{what}: {len(offsets)} offsets but {len(nbytes)} sizes")
    if len(offsets) and (offsets.min() < 0 or nbytes.min() < 0 or ((offsets + nbytes) > size).any()):
        bad = (offsets < 0) | (nbytes < 0) | (offsets + nbytes > size)
        i = int(np.argmax(bad))
        limit = int(size[i]) if np.ndim(size) else int(size)
        raise ValueError(f"{what}: range [{offsets[i]}, {offsets[i] + nbytes[i]}) outside the "
                         f"{limit}-byte memory given")


# -- kvh64 ------------------------------------------------------------------------------

def checksum_slots(data, offsets, nbytes, regions=None, *, backend: str | None = None) -> np.ndarray:
    """kvh64 (checksum.py) of many slots of many regions in one launch.

    Args:
        data: one tensor/array, or a sequence of them (regions on one device).
        offsets: byte offset of each slot inside its region.
        nbytes: bytes of each slot (one int for all, or one per slot).
        regions: index into ``data`` for each slot when ``data`` is a sequence.
    Returns:
        uint64 numpy array, one checksum per slot.
    """
    return checksum_slots_later(data, offsets, nbytes, regions, backend=backend, _now=True)()


def checksum_slots_later(data, offsets, nbytes, regions=None, *, backend: str | None = None, _now: bool = False):
    """:func:`checksum_slots` in two halves, for callers that must not wait for the GPU: the
    arguments are checked and, on CUDA, the kernel and the copy of its sums to host memory
    are queued now on the current stream (so they see the memory as the work queued before
    them leaves it); the returned function waits for them and gives the uint64 array. On
    the other backends the sums are computed now and the function just returns them."""
    views = [bytes_view(d) for d in (data if isinstance(data, (list, tuple)) else [data])]
    off = _ints(offsets)
    n = _ints(nbytes, len(off))
    reg = np.zeros(len(off), np.int64) if regions is None else _ints(regions, len(off))
    if len(reg) != len(off) or (len(reg) and (reg.min() < 0 or reg.max() >= len(views))):
        raise ValueError("checksum_slots: regions must index the data sequence, one per slot")
    # every slot inside its region, checked for all regions at once
    _check_sized(np.asarray([v.shape[0] for v in views], np.int64)[reg], off, n, "checksum_slots")
    b = _backend(views[0], backend)
    if b == "cpu":
        sums = _cpu.checksum([_host(v) for v in views], reg, off, n)
        return lambda: sums
    from . import _launch
    if _now:
        sums = _launch.checksum(views, reg, off, n, interpret=(b == "interpret"))
        return lambda: sums
    return _launch.checksum_later(views, reg, off, n, interpret=(b == "interpret"))


def checksum_rows(rows, *, backend: str | None = None) -> np.ndarray:
    """kvh64 of every row of a contiguous 2D tensor/array (a gathered view of slots)."""
    count = rows.shape[0]
    per = bytes_view(rows).shape[0] // max(count, 1)
    return checksum_slots(rows, np.arange(count, dtype=np.int64) * per, per, backend=backend)


# -- descriptor copy --------------------------------------------------------------------

def copy_ranges(src, dst, ranges, *, backend: str | None = None) -> None:
    """Byte-exact batched copy: ``dst[d:d+n] = src[s:s+n]`` for each ``(s, d, n)`` range.

    One launch for the whole batch (any alignment). Ranges take effect as if applied in
    order: when destinations overlap each other or the sources (same memory), the
    ranges run one by one, so every backend gives the same bytes.
    """
    sv, dv = bytes_view(src), bytes_view(dst)
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 3)
    so, do, n = r[:, 0].copy(), r[:, 1].copy(), r[:, 2].copy()
    _check(sv.shape[0], so, n, "copy_ranges source")
    _check(dv.shape[0], do, n, "copy_ranges destination")
    b = _backend(dv, backend)
    if _is_tensor(sv) != _is_tensor(dv) or (_is_tensor(sv) and sv.device != dv.device):
        raise ValueError("copy_ranges: source and destination must be on one device")
    if b == "cpu":
        return _cpu.copy(_host(sv), _host(dv), so, do, n)
    from . import _launch
    _launch.copy(sv, dv, so, do, n, interpret=(b == "interpret"))


# -- provenance -------------------------------------------------------------------------

def _tags(v, fn, count: int) -> np.ndarray:
    vals = [v] if isinstance(v, (str, int, np.integer)) else list(v)
    tags = [fn(x) if isinstance(x, str) else int(x) for x in vals]
    return _ints(tags, count) & 0xFFFFFFFF


def fill_provenance(dst, offsets, nbytes, request, pool, layer, page, *,
                    backend: str | None = None) -> None:
    """Write provenance pages (provenance.py) into ``dst`` in one launch.

    ``request``/``pool``: a key (str, hashed to its tag) or a tag (int), or one per page;
    ``layer``/``page``: int or one per page. Pages must not overlap.
    """
    off = _ints(offsets)
    k = len(off)
    w0 = _tags(request, request_tag, k)
    w1 = ((_tags(pool, pool_tag, k) & 0xFF) << 24) | (_ints(layer, k) & 0xFFFFFF)
    _fill(dst, off, _ints(nbytes, k), w0, w1, _ints(page, k) & 0xFFFFFFFF, np.zeros(k, np.int64), backend)


def fill_poison(dst, offsets, nbytes, *, backend: str | None = None) -> None:
    """Write the poison pattern (memory nobody wrote) into each page."""
    off = _ints(offsets)
    z = np.zeros(len(off), np.int64)
    _fill(dst, off, _ints(nbytes, len(off)), z, z, z, np.ones(len(off), np.int64), backend)


def _fill(dst, off, n, w0, w1, w2, kind, backend) -> None:
    dv = bytes_view(dst)
    _check(dv.shape[0], off, n, "fill")
    b = _backend(dv, backend)
    if b == "cpu":
        return _cpu.fill(_host(dv), off, n, w0, w1, w2, kind)
    from . import _launch
    _launch.fill(dv, off, n, w0, w1, w2, kind, interpret=(b == "interpret"))


def decode_pages(data, offsets, nbytes, *, backend: str | None = None) -> list[Provenance]:
    """provenance.decode of many pages: whose (request, pool, layer, page) bytes each holds."""
    dv = bytes_view(data)
    off = _ints(offsets)
    n = _ints(nbytes, len(off))
    _check(dv.shape[0], off, n, "decode_pages")
    b = _backend(dv, backend)
    if b == "cpu":
        return _cpu.decode_many(_host(dv), off, n)
    from . import _launch
    return _launch.decode(dv, off, n, interpret=(b == "interpret"))


def tag_names(names: Sequence[str], kind: str = "request") -> dict[int, str]:
    """Map tags back to keys: {request_tag(name): name} (or pool tags) for decoding."""
    fn = request_tag if kind == "request" else pool_tag
    return {fn(x): x for x in names}
