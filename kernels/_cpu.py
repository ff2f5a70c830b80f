"""CPU paths of the batched kernels (numpy), bit-identical to the Triton ones.

They work on flat uint8 numpy views (``api.py`` makes them, sharing memory with the
caller's tensors) and defer to the references in checksum.py and provenance.py, which are
the definitions; these only batch them.
"""
from __future__ import annotations

import numpy as np

from .checksum import kvh64_ranges
from .provenance import GROUP_SALT, POISON, POISON_SALT, Provenance, decode


def checksum(views: list[np.ndarray], regions: np.ndarray, offsets: np.ndarray,
             nbytes: np.ndarray) -> np.ndarray:
    """kvh64 of ``views[regions[i]][offsets[i]: offsets[i] + nbytes[i]]`` for every i,
    hashed where the slots lie, all regions in one call."""
    return kvh64_ranges(views, offsets, nbytes, regions)


def copy(src: np.ndarray, dst: np.ndarray, so: np.ndarray, do: np.ndarray, n: np.ndarray) -> None:
    """``dst[do:do+n] = src[so:so+n]`` for each range, in order (numpy handles overlap)."""
    for a, b, k in zip(so.tolist(), do.tolist(), n.tolist()):
        dst[b:b + k] = src[a:a + k]


def page_words(w0: np.ndarray, w1: np.ndarray, w2: np.ndarray, kind: np.ndarray,
               nwords: int) -> np.ndarray:
    """(pages, nwords) uint32: provenance words (kind 0) or poison words (kind 1)."""
    j = np.arange(nwords, dtype=np.uint32)
    lane, grp = j % 4, j // 4
    data = np.where(lane == 0, w0[:, None].astype(np.uint32),
                    np.where(lane == 1, w1[:, None].astype(np.uint32),
                             np.where(lane == 2, w2[:, None].astype(np.uint32),
                                      (grp ^ np.uint32(GROUP_SALT))[None, :])))
    pois = np.where(lane == 3, grp ^ np.uint32(POISON_SALT), np.uint32(POISON))
    return np.where(kind[:, None] != 0, pois[None, :], data).astype(np.uint32)


def fill(dst: np.ndarray, offsets: np.ndarray, nbytes: np.ndarray, w0: np.ndarray,
         w1: np.ndarray, w2: np.ndarray, kind: np.ndarray) -> None:
    """Write provenance / poison bytes of each page at ``dst[offsets[i]:+nbytes[i]]``."""
    for n in np.unique(nbytes):
        sel = np.nonzero(nbytes == n)[0]
        if n == 0:
            continue
        words = page_words(w0[sel], w1[sel], w2[sel], kind[sel], (int(n) + 3) // 4)
        rows = np.ascontiguousarray(words).view(np.uint8)[:, :n]
        dst[offsets[sel, None] + np.arange(n, dtype=np.int64)[None, :]] = rows


def decode_many(view: np.ndarray, offsets: np.ndarray, nbytes: np.ndarray) -> list[Provenance]:
    """provenance.decode of every page."""
    return [decode(view[o:o + n]) for o, n in zip(offsets.tolist(), nbytes.tolist())]
