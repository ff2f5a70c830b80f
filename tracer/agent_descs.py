"""Descriptor lists of the NIXL binding as numpy columns (address, bytes, device).

NIXL's descriptor lists (``nixlXferDList``, ``nixlRegDList``) are C++ objects; reading
them item by item costs ~0.3 µs per descriptor. Their pickled state ends with the raw
array of ``(addr u64, len u64, dev u64)`` triples, which we view with numpy (~25 µs for
1000 descriptors) after checking it against the first and last items, and fall back to
item access whenever the check fails (a future NIXL may change that layout).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

_EMPTY_U64 = np.zeros(0, np.uint64)
_EMPTY_I32 = np.zeros(0, np.int32)
_U8LE, _I4LE = np.dtype("<u8"), np.dtype("<i4")   # the pickled triples' layout (dtype objects: no parse per call)


class Descs(NamedTuple):
    """Parallel columns of a descriptor list."""
    addr: np.ndarray      # uint64
    nbytes: np.ndarray    # uint64
    device: np.ndarray    # int32
    mem_type: str         # DRAM | VRAM | BLOCK | OBJ | FILE

    def take(self, idx: np.ndarray) -> "Descs":
        """The entries at ``idx`` (a prepped transfer's index list)."""
        return Descs(self.addr[idx], self.nbytes[idx], self.device[idx], self.mem_type)


_MEM_NAMES: dict = {}


def mem_name(seg) -> str:
    """'DRAM' for DRAM_SEG, 'VRAM' for VRAM_SEG, 'BLOCK' for BLK_SEG... (per transfer
    handle: cached, the enum's str costs ~6 us)"""
    try:
        return _MEM_NAMES[seg]
    except (KeyError, TypeError):
        pass
    name = getattr(seg, "name", None) or str(seg)
    name = name.rsplit(".", 1)[-1]
    name = name[:-4] if name.endswith("_SEG") else name
    name = "BLOCK" if name == "BLK" else name
    try:
        if len(_MEM_NAMES) < 64:
            _MEM_NAMES[seg] = name
    except TypeError:   # an unhashable stand-in
        pass
    return name


def _ends_match(dl, a: np.ndarray, n: int) -> bool:
    """The (n, 3) uint64 rows ``a`` hold list ``dl``'s first and last entries (its device:
    the low 32 bits of the row's third field)."""
    f, z = a[0].tolist(), a[n - 1].tolist()
    first, last = dl[0], dl[n - 1]
    return (f[0], f[1], f[2] & 0xFFFFFFFF) == (first[0], first[1], first[2]) and \
        (z[0], z[1], z[2] & 0xFFFFFFFF) == (last[0], last[1], last[2])


def _fast(dl, n: int):
    """(addresses, sizes, devices) viewed in the list's pickled state (read-only views of
    those bytes: no copy), or None when its layout is not the one checked for."""
    raw = dl.__getstate__()
    if not raw.endswith(b"|") or len(raw) < 24 * n + 1:
        return None
    off = len(raw) - 1 - 24 * n
    a = np.frombuffer(raw, dtype=_U8LE, count=3 * n, offset=off).reshape(n, 3)
    if not _ends_match(dl, a, n):
        return None
    # the device is the low 32 bits of its u64 field, as an int32 (= (dev & 0xFFFFFFFF).astype(int32))
    return a[:, 0], a[:, 1], a.view(_I4LE)[:, 4]


def array_descs(dl, arr: np.ndarray, mem: str) -> Descs | None:
    """Columns of ``dl``, the list NIXL made of the Nx3 int64/uint64 array ``arr`` (what
    ``nixl_agent.get_xfer_descs`` took), from a copy of ``arr`` instead of reading the list
    back; None when the list does not hold those rows (checked at its first and last entry,
    as :func:`_fast` checks), so the caller reads it back."""
    n = len(arr)
    if n == 0 or arr.ndim != 2 or arr.shape[1] != 3 or arr.dtype.kind not in "iu" or arr.dtype.itemsize != 8:
        return None
    a = np.array(arr, dtype=arr.dtype, order="C").view(_U8LE)   # a copy: the engine may reuse its array
    if not _ends_match(dl, a, n):
        return None
    return Descs(a[:, 0], a[:, 1], a.view(_I4LE)[:, 4], mem)


def xfer_descs(dl) -> Descs:
    """Columns of a ``nixlXferDList`` (also works for any list with item access)."""
    n = dl.descCount()
    mem = mem_name(dl.getType())
    if n == 0:
        return Descs(_EMPTY_U64, _EMPTY_U64, _EMPTY_I32, mem)
    try:
        cols = _fast(dl, n)
    except Exception:  # layout changed: item access below is always right
        cols = None
    if cols is not None:
        return Descs(cols[0], cols[1], cols[2], mem)
    a = np.array([tuple(dl[i])[:3] for i in range(n)], dtype=np.uint64).reshape(n, 3)
    return Descs(a[:, 0].copy(), a[:, 1].copy(), (a[:, 2] & 0xFFFFFFFF).astype(np.int32), mem)


def reg_descs(dl) -> Descs:
    """Columns of a ``nixlRegDList`` (few entries: item access; entries carry meta strings)."""
    n = dl.descCount()
    rows = [tuple(dl[i])[:3] for i in range(n)]
    a = np.array(rows, dtype=np.uint64).reshape(n, 3)
    return Descs(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].astype(np.int32), mem_name(dl.getType()))


def strided_descs(arr: np.ndarray, mem_type: str) -> Descs:
    """Expand an Nx5 (addr, len, dev, stride, count) prep array, row by row."""
    arr = np.asarray(arr, dtype=np.uint64)
    counts = arr[:, 4].astype(np.int64)
    rows = np.repeat(np.arange(len(arr)), counts)
    k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    addr = arr[rows, 0] + k.astype(np.uint64) * arr[rows, 3]
    return Descs(addr, arr[rows, 1].copy(), arr[rows, 2].astype(np.int32), mem_type)
