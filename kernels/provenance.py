"""Provenance content: bytes that say whose they are (CPU reference, numpy).

A page of ``nbytes`` is filled with 16-byte groups of four little-endian uint32 words:

    w0 = request_tag            crc32 of the request key
    w1 = pool_tag << 24 | layer crc32(pool) & 0xFF, layer in 24 bits
    w2 = page                   page ordinal within the request's sequence
    w3 = group ^ 0xA5A50000     group index within the page (so misaligned copies show)

A trailing partial group is cut short. Memory nobody wrote is filled with POISON words
tagged with their group offset, so "never delivered" is recognisable too. ``decode``
turns a page back into (request_tag, pool_tag, layer, page) with the fraction of groups
that agree, or reports poison / garbage.
"""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np

GROUP_SALT = 0xA5A50000
POISON = 0xDEADBEEF
POISON_SALT = 0x5A5A0000


def request_tag(request: str) -> int:
    """32-bit tag of a request key."""
    return zlib.crc32(str(request).encode()) & 0xFFFFFFFF


def pool_tag(pool: str) -> int:
    """8-bit tag of a pool name."""
    return zlib.crc32(str(pool).encode()) & 0xFF


def fill_page(request: str, pool: str, layer: int, page: int, nbytes: int) -> np.ndarray:
    """The provenance bytes of one page of one layer (uint8 array of ``nbytes``)."""
    return fill_pages(request_tag(request), pool_tag(pool), layer, np.asarray([page]), nbytes)[0]


def fill_pages(req_tag: int, ptag: int, layer: int, pages: np.ndarray, nbytes: int) -> np.ndarray:
    """Provenance bytes for many pages of one (request, pool, layer): (len(pages), nbytes) uint8."""
    groups = (nbytes + 15) // 16
    g = np.arange(groups, dtype=np.uint32)
    out = np.empty((len(pages), groups, 4), dtype=np.uint32)
    out[:, :, 0] = np.uint32(req_tag)
    out[:, :, 1] = np.uint32(((ptag & 0xFF) << 24) | (layer & 0xFFFFFF))
    out[:, :, 2] = np.asarray(pages, dtype=np.uint32)[:, None]
    out[:, :, 3] = g ^ np.uint32(GROUP_SALT)
    return out.reshape(len(pages), -1).view(np.uint8)[:, :nbytes].copy()


def poison(nbytes: int, count: int = 1) -> np.ndarray:
    """Poison for memory nobody wrote: (count, nbytes) uint8."""
    groups = (nbytes + 15) // 16
    g = np.arange(groups * 4, dtype=np.uint32)
    words = np.where(g % 4 == 3, (g // 4) ^ np.uint32(POISON_SALT), np.uint32(POISON)).astype(np.uint32)
    row = words.view(np.uint8)[:nbytes]
    return np.tile(row, (count, 1))


@dataclasses.dataclass(frozen=True)
class Provenance:
    """What a page's bytes say about where they came from."""
    kind: str                 # "data" | "poison" | "garbage"
    request_tag: int | None = None
    pool_tag: int | None = None
    layer: int | None = None
    page: int | None = None
    agree: float = 0.0        # fraction of 16-byte groups consistent with this answer
    aligned: bool = True      # group offsets match their position


def decode(page_bytes: np.ndarray) -> Provenance:
    """Who wrote this page? The majority (request, pool, layer, page) of its groups."""
    b = np.ascontiguousarray(page_bytes, dtype=np.uint8)
    n = (len(b) // 16) * 16
    if n == 0:
        return Provenance("garbage")
    w = b[:n].view("<u4").reshape(-1, 4)
    groups = np.arange(len(w), dtype=np.uint32)
    if np.mean(w[:, 0] == POISON) > 0.5:
        return Provenance("poison", agree=float(np.mean(w[:, 0] == POISON)))
    keys = w[:, 0].astype(np.uint64) << np.uint64(32) | w[:, 1].astype(np.uint64)
    vals, counts = np.unique(np.stack([keys, w[:, 2].astype(np.uint64)], 1), axis=0, return_counts=True)
    best = vals[np.argmax(counts)]
    agree = float(counts.max()) / len(w)
    aligned = bool(np.all((w[:, 3] ^ np.uint32(GROUP_SALT)) == groups))
    hi = int(best[0]) >> 32
    w1 = int(best[0]) & 0xFFFFFFFF
    return Provenance("data", hi, w1 >> 24, w1 & 0xFFFFFF, int(best[1]), agree, aligned)
