"""kvh64 — the trace's 64-bit slot checksum on the CPU: the definition (numpy) and the fast path.

Definition (the Triton kernel in ``kernels/triton_checksum.py`` computes the same bits):

* the slot's ``n`` bytes are zero-padded to a multiple of 4 and read as little-endian
  uint32 words ``w[0..m)``;
* for word ``i``: ``k = i * 0x9E3779B1``, ``lo_i = fmix32(w[i] ^ k)``,
  ``hi_i = fmix32(lo_i + 0x27D4EB2F)`` (all arithmetic mod 2**32; ``fmix32`` is
  MurmurHash3's finalizer);
* ``lo = (sum(lo_i) + n) mod 2**32``, ``hi = sum(hi_i) mod 2**32``;
* ``kvh64 = hi << 32 | lo``.

Each word is mixed with its own position, so moved or misaligned bytes change the hash,
and the reduction is a plain sum, so any number of GPU threads can compute partial sums
in any order and get the same bits.

``kvh64_rows`` and ``kvh64_ranges`` hash with the C extension ``_kvh64`` (built by setup.py
when a compiler is there; in place, no gather copy, the GIL released for long calls) and fall back to numpy
when it is absent or ``KVTRACE_KVH64=numpy`` is set. Both give the definition's bits
(tests/kernels); ``NATIVE`` says which one this process uses.
"""
from __future__ import annotations

import os

import numpy as np

try:  # optional: an install without a C compiler has no extension
    from ._kvh64 import hash_ranges as _c_hash_ranges
except ImportError:
    _c_hash_ranges = None
_native = _c_hash_ranges if os.environ.get("KVTRACE_KVH64", "").lower() != "numpy" else None
NATIVE = _native is not None


def _takes_release() -> bool:
    """Whether the built extension takes the GIL argument (one built from an older
    _kvh64.c does not; it still gives the same bits, holding the GIL for short calls)."""
    try:
        _native(np.zeros(4, np.uint8), np.zeros(1, np.int64), np.ones(1, np.int64), np.empty(1, np.uint64),
                np.zeros(1, np.int64), 1)
        return True
    except TypeError:
        return False


_RELEASE_ARG = NATIVE and _takes_release()

GOLDEN = np.uint32(0x9E3779B1)
HI_SALT = np.uint32(0x27D4EB2F)
M1 = np.uint32(0x85EBCA6B)
M2 = np.uint32(0xC2B2AE35)


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3 32-bit finalizer, elementwise on a uint32 array."""
    h = h ^ (h >> np.uint32(16))
    h = h * M1
    h = h ^ (h >> np.uint32(13))
    h = h * M2
    return h ^ (h >> np.uint32(16))


def _words(rows: np.ndarray) -> np.ndarray:
    """(slots, nbytes) uint8 → (slots, m) uint32, zero-padded to a multiple of 4 bytes."""
    n = rows.shape[1]
    pad = (-n) % 4
    if pad:
        rows = np.concatenate([rows, np.zeros((rows.shape[0], pad), np.uint8)], axis=1)
    return np.ascontiguousarray(rows).view("<u4")


def kvh64_rows_reference(rows: np.ndarray) -> np.ndarray:
    """kvh64 of every row of a (slots, nbytes) array, written as the definition reads
    (whole-array temporaries); ``kvh64_rows`` must give these bits (tests/kernels)."""
    rows = _as_rows(rows)
    n = rows.shape[1]
    w = _words(rows)
    idx = np.arange(w.shape[1], dtype=np.uint32) * GOLDEN
    with np.errstate(over="ignore"):
        lo_i = fmix32(w ^ idx[None, :])
        hi_i = fmix32(lo_i + HI_SALT)
        lo = (lo_i.sum(axis=1, dtype=np.uint64) + np.uint64(n)) & np.uint64(0xFFFFFFFF)
        hi = hi_i.sum(axis=1, dtype=np.uint64) & np.uint64(0xFFFFFFFF)
    return (hi << np.uint64(32)) | lo


def _as_rows(rows) -> np.ndarray:
    rows = np.ascontiguousarray(rows)
    if rows.ndim == 1:
        rows = rows[None, :]
    if rows.shape[0] == 0:   # no slots (reshape(-1) cannot infer a width)
        return np.zeros((0, 0), np.uint8)
    return rows.reshape(rows.shape[0], -1).view(np.uint8)


_S16, _S13 = np.uint32(16), np.uint32(13)
_BLOCK_WORDS = 1 << 16   # words hashed per step: 256 KiB temporaries stay in L2


def _fmix32_inplace(h: np.ndarray, tmp: np.ndarray) -> None:
    np.right_shift(h, _S16, out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    np.multiply(h, M1, out=h)
    np.right_shift(h, _S13, out=tmp)
    np.bitwise_xor(h, tmp, out=h)
    np.multiply(h, M2, out=h)
    np.right_shift(h, _S16, out=tmp)
    np.bitwise_xor(h, tmp, out=h)


def kvh64_rows(rows: np.ndarray) -> np.ndarray:
    """kvh64 of every row of a (slots, nbytes) array (any dtype: hashed as raw bytes)."""
    rows = _as_rows(rows)
    count, n = rows.shape
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    if _native is not None:
        out = np.empty(count, np.uint64)
        _native(rows, np.arange(count, dtype=np.int64) * n, np.full(count, n, np.int64), out)
        return out
    return _kvh64_rows_numpy(rows)


def kvh64_ranges(data, offsets, nbytes, regions=None, *, release_gil: bool | None = None) -> np.ndarray:
    """kvh64 of ``data[offsets[i]:offsets[i] + nbytes[i]]`` for every i, where ``data`` is a
    flat C-contiguous uint8 array (engine memory seen in place), or a list of them with
    ``regions[i]`` naming range i's (all layers of a page in one call). The C path reads the
    ranges where they lie; numpy gathers them first. Ranges outside the memory: ValueError.
    ``release_gil`` (C path): True gives the GIL away for the whole hash (what a background
    hashing thread wants), False never, None only for long calls (what a caller on the
    engine's critical path wants: getting the GIL back can cost more than a short hash)."""
    off = np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1)
    n = np.ascontiguousarray(np.broadcast_to(np.asarray(nbytes, dtype=np.int64), off.shape))
    views = data if regions is not None else [data]
    reg = (np.zeros(len(off), np.int64) if regions is None
           else np.ascontiguousarray(np.broadcast_to(np.asarray(regions, dtype=np.int64), off.shape)))
    out = np.empty(len(off), np.uint64)
    if _native is not None:
        if _RELEASE_ARG:
            _native(list(views), off, n, out, reg, -1 if release_gil is None else int(bool(release_gil)))
        else:
            _native(list(views), off, n, out, reg)
        return out
    if len(reg) and (reg.min() < 0 or reg.max() >= len(views)):
        raise ValueError(f"kvh64_ranges: regions must index the {len(views)} buffers given")
    for r in np.unique(reg):
        sel = np.nonzero(reg == r)[0]
        out[sel] = _ranges_numpy(views[r], off[sel], n[sel])
    return out


def _ranges_numpy(data: np.ndarray, off: np.ndarray, n: np.ndarray) -> np.ndarray:
    if len(off) and (off.min() < 0 or n.min() < 0 or (off + n).max() > data.shape[0]):
        raise ValueError(f"kvh64_ranges: a range lies outside the {data.shape[0]}-byte memory given")
    out = np.empty(len(off), np.uint64)
    for width in np.unique(n):  # ranges of one width hash together as one gathered 2D array
        sel = np.nonzero(n == width)[0]
        if width == 0:
            out[sel] = _kvh64_rows_numpy(np.zeros((len(sel), 0), np.uint8))
            continue
        windows = np.lib.stride_tricks.sliding_window_view(data, int(width))
        for chunk in np.array_split(sel, max(1, len(sel) * int(width) // (64 << 20) + 1)):
            out[chunk] = _kvh64_rows_numpy(windows[off[chunk]])
    return out


def _kvh64_rows_numpy(rows: np.ndarray) -> np.ndarray:
    """kvh64_rows without the C extension: the same bits as the reference, rows hashed a
    few at a time with in-place operations so the temporaries stay in cache (about 10x the
    reference's speed; the C path is several times faster again)."""
    rows = _as_rows(rows)
    count, n = rows.shape
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    w = _words(rows)
    m = w.shape[1]
    idx = np.arange(m, dtype=np.uint32) * GOLDEN
    lo = np.empty(count, np.uint32)
    hi = np.empty(count, np.uint32)
    per = max(1, _BLOCK_WORDS // max(m, 1))
    h = np.empty((min(per, count), m), np.uint32)
    tmp = np.empty_like(h)
    with np.errstate(over="ignore"):
        for a in range(0, count, per):
            b = min(a + per, count)
            hb, tb = h[: b - a], tmp[: b - a]
            np.bitwise_xor(w[a:b], idx[None, :], out=hb)
            _fmix32_inplace(hb, tb)
            hb.sum(axis=1, dtype=np.uint32, out=lo[a:b])      # sums wrap mod 2**32
            np.add(hb, HI_SALT, out=hb)
            _fmix32_inplace(hb, tb)
            hb.sum(axis=1, dtype=np.uint32, out=hi[a:b])
        lo += np.uint32(n & 0xFFFFFFFF)
    return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)


def kvh64(data) -> int:
    """kvh64 of one buffer (bytes, bytearray, memoryview or numpy array)."""
    arr = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    return int(kvh64_rows(arr.reshape(1, -1))[0])
