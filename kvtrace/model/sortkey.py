"""Sorting rows by several integer keys with one argsort: each key is shifted to start at 0
and given as many bits as its range needs, the keys' bits are concatenated (most
significant key first) and cut into 64-bit words. Where the first word orders the rows
(every key fits in it, or its values are distinct), one argsort of it is the order; rows
whose first words tie are then ordered by the other words (a lexsort of those rows only).

np.lexsort sorts once per key (a stable indirect sort each): inflight.py's sweep sorted 13.6M
ends by 7 to 12 keys with it at 10M events, 2.1 of its ~10 cpu-s. Keys of any range work (a trace is
untrusted: an address may be any 64-bit value); wide ones only cost more words. Ties on
every key keep the rows' order (every sort here is stable): the permutation is np.lexsort's.

The first word's argsort is numpy's stable sort, not its default quicksort: faster on
every order measured (the 10M synthetic trace's sweep words, 6.8M per range, 99% of
neighbours already ascending in the query's order: 0.22-0.25 vs 0.71 cpu-s; the same words
shuffled: 0.87 vs 1.05; in runs of 64 shuffled: 0.14 vs 0.69; bench/results/checks.txt).

The words are filled a block of rows at a time (Packing.fill), so the keys are never whole
columns of their own: only the words and the order are as long as the rows."""
from __future__ import annotations

import numpy as np

#: past this share of rows in tied runs of the first word, one lexsort of all the words
#: (sorting most rows twice costs more than sorting them once by every word)
TIED_SHARE = 0.25


class Key:
    """One sort key's range: values map to (value - low) in ``bits`` bits, order kept (a
    signed value's difference is exact in uint64's wrapping arithmetic)."""

    def __init__(self, low: int, high: int, signed: bool) -> None:
        self.signed = signed
        self.low = low % (1 << 64)
        self.bits = (high - low).bit_length()

    @classmethod
    def of(cls, low: int | None, high: int | None, signed: bool, nulls: bool = False) -> Key:
        """The key of a column whose values lie in [low, high] (None: no values); a column
        with ``nulls`` holds 0 in their place too (its null flag, a key of its own, orders them)."""
        vals = [v for v in (low, high) if v is not None] + ([0] if nulls or low is None else [])
        return cls(min(vals), max(vals), signed)

    def values(self, x: np.ndarray) -> np.ndarray:
        """``x`` (a block of the column) as this key's uint64 values (a new array)."""
        u = x.astype(np.int64).view(np.uint64) if self.signed else x.astype(np.uint64)
        u -= np.uint64(self.low)
        return u


class Packing:
    """Where each key's bits go: the keys' bits concatenated (the first key's most
    significant bit first) and cut into 64-bit words; the last word holds what is left."""

    def __init__(self, keys: list[Key]) -> None:
        self.keys = keys
        total = sum(k.bits for k in keys)
        self.nwords = -(-total // 64)
        width = [min(64, total - 64 * w) for w in range(self.nwords)]   # bits used per word
        #: per key: (word, shift in the word, the key's bits taken: (drop low bits, keep bits))
        self.pieces: list[list[tuple[int, int, int, int]]] = []
        at = 0                                             # offset in the concatenation
        for k in keys:
            pieces, left = [], k.bits
            while left:
                w, off = divmod(at, 64)
                take = min(64 - off, left)
                left -= take
                pieces.append((w, width[w] - off - take, left, take))
                at += take
            self.pieces.append(pieces)

    def fill(self, words: list[np.ndarray], blocks: list[np.ndarray]) -> None:
        """Write one block of rows into ``words`` (slices of the nwords word arrays):
        ``blocks``, the keys' columns for these rows (any integer or bool dtype)."""
        for w in words:
            w[:] = 0
        for key, pieces, x in zip(self.keys, self.pieces, blocks):
            if not pieces:
                continue
            v = key.values(x)
            for w, shift, drop, take in pieces:
                part = v >> np.uint64(drop) if drop else v
                if take < 64:
                    part = part & np.uint64((1 << take) - 1)
                if shift:
                    part = part << np.uint64(shift)
                words[w] |= part


def order(words: list[np.ndarray], n: int, block: int = 1 << 16) -> np.ndarray:
    """The permutation sorting ``n`` rows by their ``words`` (Packing: most significant first)."""
    if not words:
        return np.arange(n, dtype=np.int64)
    perm = np.argsort(words[0], kind="stable")
    if len(words) == 1 or n < 2:
        return perm
    # positions p whose first word equals the next one's, found a block at a time
    ties = []
    for s in range(0, n - 1, block):
        f = words[0][perm[s:s + block + 1]]
        ties.append(np.flatnonzero(f[1:] == f[:-1]) + s)
    tie = np.concatenate(ties)
    if not len(tie):
        return perm
    if 2 * len(tie) > TIED_SHARE * n:
        return np.lexsort(words[::-1])
    at = np.union1d(tie, tie + 1)                        # the rows of tied runs, in order
    run = np.cumsum(~np.isin(at - 1, tie))               # a run starts where a row ties no earlier one
    rows = perm[at]
    perm[at] = rows[np.lexsort([w[rows] for w in words[:0:-1]] + [run])]
    return perm
