"""Triton kernels: kvh64 of many slots, batched range copy, provenance fill, decode counts.

The kernel bodies below are plain functions; ``build(interpret)`` turns them into Triton
kernels, either compiled (CUDA) or run by Triton's interpreter on CPU tensors. Triton
decides interpretation when a function is decorated, and its own library functions
(``tl.zeros``, ``tl.sum``) are decorated when triton is first imported: the interpreter
therefore needs ``TRITON_INTERPRET=1`` set before that import (tests/kernels/conftest.py
does it on machines without CUDA), and compiled kernels need it unset.

Every kernel addresses memory as ``base + delta`` (a byte or word offset, int64, possibly
negative): several regions are reached from one anchor tensor, which is legal because
Triton pointer arithmetic is raw. The host side (``api.py``) checks every range lies
inside a tensor it was given.
"""
from __future__ import annotations

import contextlib
import os
import types

import triton
import triton.language as tl

# the constants of checksum.py / provenance.py; constexpr so kernels may read them (Triton 3.6
# refuses plain globals); above 2**31 they type as uint32, so products wrap mod 2**32
GOLDEN = tl.constexpr(0x9E3779B1)
HI_SALT = tl.constexpr(0x27D4EB2F)
M1 = tl.constexpr(0x85EBCA6B)
M2 = tl.constexpr(0xC2B2AE35)
GROUP_SALT = tl.constexpr(0xA5A50000)
POISON = tl.constexpr(0xDEADBEEF)
POISON_SALT = tl.constexpr(0x5A5A0000)


def _kvh64_partial(base8, base32, delta_ptr, nbytes_ptr, lo_ptr, hi_ptr, n_split,
                   BLOCK: tl.constexpr, ITERS: tl.constexpr, ALIGNED: tl.constexpr, HINT: tl.constexpr,
                   FULL: tl.constexpr = False):
    """Partial kvh64 sums of word chunk ``program_id(1)`` of slot ``program_id(0)``.

    ALIGNED: every delta and nbytes is a multiple of 4 → read int32 words (delta in words);
    else read bytes and assemble little-endian words, zero-padding the tail. HINT: every
    delta is a multiple of HINT elements, so the loads can be vectorized. FULL (with
    ALIGNED): every slot is exactly the grid's chunks long, so no lane needs a mask -- the
    hash is ALU bound and the masks and selects are a sixth of its work.
    """
    slot = tl.program_id(0)
    split = tl.program_id(1)
    delta = tl.load(delta_ptr + slot)
    if HINT > 1:
        delta = tl.multiple_of(delta, HINT)
    n = tl.load(nbytes_ptr + slot)
    # word indices in int32 (the host keeps slots under 2 GiB): the hash is integer-ALU
    # bound on an H200, and 64-bit index arithmetic costs two instructions per operation
    n32 = n.to(tl.int32)
    nwords = (n32 + 3) // 4
    row8 = base8 + delta
    row32 = base32 + delta
    idx = tl.arange(0, BLOCK)
    acc_lo = tl.zeros([BLOCK], dtype=tl.uint32)
    acc_hi = tl.zeros([BLOCK], dtype=tl.uint32)
    for it in tl.static_range(ITERS):
        wi = split * (BLOCK * ITERS) + it * BLOCK + idx
        m = wi < nwords
        if FULL:
            w = tl.load(row32 + wi).to(tl.uint32, bitcast=True)
        elif ALIGNED:
            w = tl.load(row32 + wi, mask=m, other=0).to(tl.uint32, bitcast=True)
        else:
            bi = wi * 4
            b0 = tl.load(row8 + bi, mask=bi < n32, other=0).to(tl.uint32)
            b1 = tl.load(row8 + bi + 1, mask=bi + 1 < n32, other=0).to(tl.uint32)
            b2 = tl.load(row8 + bi + 2, mask=bi + 2 < n32, other=0).to(tl.uint32)
            b3 = tl.load(row8 + bi + 3, mask=bi + 3 < n32, other=0).to(tl.uint32)
            w = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)
        h = w ^ (wi.to(tl.uint32) * GOLDEN)
        h = h ^ (h >> 16)
        h = h * M1
        h = h ^ (h >> 13)
        h = h * M2
        lo = h ^ (h >> 16)
        g = lo + HI_SALT
        g = g ^ (g >> 16)
        g = g * M1
        g = g ^ (g >> 13)
        g = g * M2
        hi = g ^ (g >> 16)
        if FULL:
            acc_lo += lo
            acc_hi += hi
        else:
            acc_lo += tl.where(m, lo, 0)
            acc_hi += tl.where(m, hi, 0)
    # sums mod 2**32 are order-free, so any split of the slot gives the same bits
    out = slot.to(tl.int64) * n_split + split
    tl.store(lo_ptr + out, tl.sum(acc_lo, axis=0).to(tl.int32, bitcast=True))
    tl.store(hi_ptr + out, tl.sum(acc_hi, axis=0).to(tl.int32, bitcast=True))


def _copy_ranges(src, dst, soff_ptr, doff_ptr, n_ptr,
                 BLOCK: tl.constexpr, ITERS: tl.constexpr, HINT: tl.constexpr):
    """Copy chunk ``program_id(1)`` of range ``program_id(0)``: dst[do:do+n] = src[so:so+n].

    Offsets and sizes are in elements of the views passed (bytes or int32 words); HINT
    states they are multiples of HINT elements so the compiler can vectorize.
    """
    r = tl.program_id(0)
    c = tl.program_id(1)
    so = tl.load(soff_ptr + r)
    do = tl.load(doff_ptr + r)
    n = tl.load(n_ptr + r)
    if HINT > 1:
        so = tl.multiple_of(so, HINT)
        do = tl.multiple_of(do, HINT)
    idx = tl.arange(0, BLOCK).to(tl.int64)
    for it in tl.static_range(ITERS):
        i = c.to(tl.int64) * (BLOCK * ITERS) + it * BLOCK + idx
        m = i < n
        v = tl.load(src + so + i, mask=m)
        tl.store(dst + do + i, v, mask=m)


def _fill_words(dst8, dst32, delta_ptr, nbytes_ptr, w0_ptr, w1_ptr, w2_ptr, kind_ptr,
                BLOCK: tl.constexpr, ITERS: tl.constexpr, ALIGNED: tl.constexpr):
    """Provenance (kind 0) or poison (kind 1) words for chunk ``program_id(1)`` of page 0.

    Word j of a page is lane j % 4 of group j // 4 (see provenance.py); ALIGNED stores
    int32 words, else each byte is cut from its word so any offset and length work.
    """
    p = tl.program_id(0)
    c = tl.program_id(1)
    delta = tl.load(delta_ptr + p)
    n = tl.load(nbytes_ptr + p)
    a = tl.load(w0_ptr + p).to(tl.uint32, bitcast=True)
    b = tl.load(w1_ptr + p).to(tl.uint32, bitcast=True)
    pg = tl.load(w2_ptr + p).to(tl.uint32, bitcast=True)
    poison = tl.load(kind_ptr + p) != 0
    idx = tl.arange(0, BLOCK).to(tl.int64)
    for it in tl.static_range(ITERS):
        i = c.to(tl.int64) * (BLOCK * ITERS) + it * BLOCK + idx
        if ALIGNED:
            wi = i
        else:
            wi = i // 4
        lane = wi % 4
        grp = (wi // 4).to(tl.uint32)
        data = tl.where(lane == 0, a, tl.where(lane == 1, b, tl.where(lane == 2, pg, grp ^ GROUP_SALT)))
        pois = tl.where(lane == 3, grp ^ POISON_SALT, POISON)
        word = tl.where(poison, pois, data)
        if ALIGNED:
            tl.store(dst32 + delta + i, word.to(tl.int32, bitcast=True), mask=i * 4 < n)
        else:
            byte = (word >> ((i % 4).to(tl.uint32) * 8)) & 0xFF
            tl.store(dst8 + delta + i, byte.to(tl.uint8), mask=i < n)


def _decode_counts(base32, delta_ptr, groups_ptr, cand_ptr, cnt_ptr, n_split,
                   BLOCK: tl.constexpr):
    """Per page and group chunk: poison groups, groups equal to each of 3 candidate keys
    (w0, w1, w2), and groups whose offset tag is wrong. Writes 5 partial counts."""
    p = tl.program_id(0)
    c = tl.program_id(1)
    delta = tl.load(delta_ptr + p)
    ng = tl.load(groups_ptr + p)
    g = c.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = g < ng
    w0 = tl.load(base32 + delta + g * 4, mask=m, other=0).to(tl.uint32, bitcast=True)
    w1 = tl.load(base32 + delta + g * 4 + 1, mask=m, other=0).to(tl.uint32, bitcast=True)
    w2 = tl.load(base32 + delta + g * 4 + 2, mask=m, other=0).to(tl.uint32, bitcast=True)
    w3 = tl.load(base32 + delta + g * 4 + 3, mask=m, other=0).to(tl.uint32, bitcast=True)
    out = (p.to(tl.int64) * n_split + c) * 5
    tl.store(cnt_ptr + out, tl.sum((m & (w0 == POISON)).to(tl.int32), axis=0))
    for k in tl.static_range(3):
        c0 = tl.load(cand_ptr + p * 9 + k * 3).to(tl.uint32, bitcast=True)
        c1 = tl.load(cand_ptr + p * 9 + k * 3 + 1).to(tl.uint32, bitcast=True)
        c2 = tl.load(cand_ptr + p * 9 + k * 3 + 2).to(tl.uint32, bitcast=True)
        hit = m & (w0 == c0) & (w1 == c1) & (w2 == c2)
        tl.store(cnt_ptr + out + 1 + k, tl.sum(hit.to(tl.int32), axis=0))
    bad = m & ((w3 ^ GROUP_SALT) != g.to(tl.uint32))
    tl.store(cnt_ptr + out + 4, tl.sum(bad.to(tl.int32), axis=0))


@contextlib.contextmanager
def _interpret_env(interpret: bool):
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = old


_BUILT: dict[bool, types.SimpleNamespace] = {}


def build(interpret: bool) -> types.SimpleNamespace:
    """The four kernels, compiled for CUDA (``interpret=False``) or interpreted on CPU."""
    if interpret not in _BUILT:
        # a plain builtin (older Triton) works both ways; a decorated one fixes the mode
        lib = type(tl.zeros).__name__
        if lib == ("JITFunction" if interpret else "InterpretedFunction"):
            raise RuntimeError("Triton was imported with TRITON_INTERPRET=%s; the %s kernels need it "
                               "%s before triton is first imported" % (os.environ.get("TRITON_INTERPRET"),
                               "interpreted" if interpret else "compiled", "=1" if interpret else "unset"))
        with _interpret_env(interpret):
            _BUILT[interpret] = types.SimpleNamespace(
                kvh64=triton.jit(_kvh64_partial), copy=triton.jit(_copy_ranges),
                fill=triton.jit(_fill_words), decode=triton.jit(_decode_counts))
    return _BUILT[interpret]
