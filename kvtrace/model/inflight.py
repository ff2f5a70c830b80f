"""inflight_pairs, built with numpy: pairs of descriptor ends of two different transfers
that overlap in bytes on the same agent while both are in flight (neither transfer is
known to have ended — done, error or notification — before the other was posted).

Candidates: per agent and 64 KiB address bucket, ends sorted by (addr, post time, shard,
post seq, pos, side); each end is compared with its next 4 neighbours in that order (a
linear-cost sweep; t_ns only orders candidates, happens-before decides). Overlaps further
apart than 4 neighbours, or across a bucket boundary, are not examined.

One lexsort and four shifted comparisons replace SQL's row_number window and its
self-join (at 1M events ~10 s of a window over 1.4M ends and a 5.3M-row join); the
happens-before filter is a sorted-key lookup instead of two hash joins.

Columns (as before, one row per pair):
  agent VARCHAR
  a_shard, a_xfer, a_side, a_request, a_post  -- the earlier-sorted end
  b_shard, b_xfer, b_side, b_request, b_post  -- the later-sorted end
  pool VARCHAR, layer INTEGER, slot BIGINT     -- where (from a's layout position)
  lo UBIGINT, hi UBIGINT                       -- overlapping byte range
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NEIGHBOURS = 4
BUCKET = 65536


def _np(col: pa.ChunkedArray, fill=0, dtype=None) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    out = arr.to_numpy(zero_copy_only=False)
    return out.astype(dtype) if dtype is not None else out


def _nulls(col: pa.ChunkedArray) -> np.ndarray:
    return _np(pc.is_null(col), False, bool)


def sort_codes(col: pa.ChunkedArray) -> np.ndarray:
    """Integer codes of a string column whose order is the strings' order (SQL's ORDER BY:
    byte order, nulls last)."""
    enc = pc.dictionary_encode(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col)
    words = enc.dictionary.to_pylist()
    rank = np.empty(len(words) + 1, np.int64)
    rank[np.argsort(np.array(words, dtype=object), kind="stable")] = np.arange(len(words))
    rank[len(words)] = len(words)                     # null: after every value
    idx = _np(enc.indices, len(words), np.int64)
    return rank[idx]


def empty_pairs(ends: pa.Table) -> pa.Table:
    return pairs_table(ends, np.empty(0, np.int64), np.empty(0, np.int64))


def pairs_table(ends: pa.Table, a: np.ndarray, b: np.ndarray) -> pa.Table:
    ta, tb = pa.array(a, pa.int64()), pa.array(b, pa.int64())
    c = lambda name, t: ends.column(name).take(t)  # noqa: E731
    a_addr, b_addr = _np(c("addr", ta), 0, np.uint64), _np(c("addr", tb), 0, np.uint64)
    a_n, b_n = _np(c("nbytes", ta), 0, np.uint64), _np(c("nbytes", tb), 0, np.uint64)
    return pa.table({
        "agent": c("agent", ta),
        "a_shard": c("shard", ta), "a_xfer": c("xfer", ta), "a_side": c("side", ta),
        "a_request": c("request", ta), "a_post": c("post_seq", ta),
        "b_shard": c("shard", tb), "b_xfer": c("xfer", tb), "b_side": c("side", tb),
        "b_request": c("request", tb), "b_post": c("post_seq", tb),
        "pool": c("pool", ta), "layer": c("layer", ta), "slot": c("slot", ta),
        "lo": pa.array(np.maximum(a_addr, b_addr), pa.uint64()),
        "hi": pa.array(np.minimum(a_addr + a_n, b_addr + b_n), pa.uint64()),
    })


def inflight_pairs(ends: pa.Table, seen: pa.Table, shards: list[str]) -> pa.Table:
    """The pairs (see module doc) from the ends (queries/inflight_ends.sql) and when each
    shard knows each transfer over (queries/inflight_seen.sql)."""
    n = ends.num_rows
    if n < 2:
        return empty_pairs(ends)
    col = ends.column
    shard_ix = lambda c: _np(pc.index_in(c, value_set=pa.array(shards, pa.string())), -1, np.int64)  # noqa: E731
    shard_rank = sort_codes(col("shard"))
    addr = _np(col("addr"), 0, np.uint64)
    agent = sort_codes(col("agent"))
    # ORDER BY addr, t_ns, shard, post_seq, pos, side within (agent, addr bucket): the bucket
    # follows addr. Null flags (nulls last) only for columns that have nulls.
    keys = [sort_codes(col("side")), _np(col("pos"), 0, np.int64)]
    for name, val in (("pos", None), ("post_seq", None), ("shard", shard_rank), ("t_ns", None)):
        if name != "pos":
            keys.append(val if val is not None else _np(col(name), 0, np.int64))
        if col(name).null_count:
            keys.append(_nulls(col(name)))
    order = np.lexsort(keys + [addr, agent])
    del keys
    # every per-end array in sorted order: the k-th neighbour of sorted row i is row i + k
    agent, addr, shard_rank = agent[order], addr[order], shard_rank[order]
    bucket = addr // np.uint64(BUCKET)
    nb_ok = ~_nulls(col("nbytes"))[order]
    nbytes = _np(col("nbytes"), 0, np.uint64)[order]
    end_ = addr + nbytes
    xfer = _np(col("xfer"), 0, np.int64)[order]
    post = _np(col("post_seq"), 0, np.int64)[order]
    post_ok = ~_nulls(col("post_seq"))[order]
    psidx = _np(col("psidx"), -1, np.int64)[order]
    shard = shard_ix(col("shard"))[order]
    # when each shard knows each transfer over: a sorted key (transfer, side shard) -> end_seq
    s_shard, s_xfer = shard_ix(seen.column("shard")), _np(seen.column("xfer"), 0, np.int64)
    s_side, s_end = _np(seen.column("side_sidx"), -1, np.int64), _np(seen.column("end_seq"), 0, np.int64)
    ux = np.unique(s_xfer)                     # transfers some shard knows over (few)
    sdx = np.searchsorted(ux, s_xfer)
    dx = np.minimum(np.searchsorted(ux, xfer), max(len(ux) - 1, 0))
    known = (ux[dx] == xfer) if len(ux) else np.zeros(n, bool)
    nx, ns = len(ux) + 1, len(shards) + 1
    tkey = np.where(known, (shard + 1) * nx + dx, -1)   # the end's transfer (-1: never known over)
    s_key = ((s_shard + 1) * nx + sdx) * ns + (s_side + 1)
    s_order = np.argsort(s_key, kind="stable")
    s_key, s_end = s_key[s_order], s_end[s_order]

    def over_before(t: np.ndarray, on: np.ndarray, post_at: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """Transfer ``t`` (sorted rows) is known over on shard ``on`` by seq ``post_at``."""
        k = tkey[t] * ns + (on + 1)
        at = np.minimum(np.searchsorted(s_key, k), max(len(s_key) - 1, 0))
        if not len(s_key):
            return np.zeros(len(t), bool)
        return (s_key[at] == k) & (tkey[t] >= 0) & (on >= 0) & ok & (s_end[at] <= post_at)

    As, Bs = [], []
    for k in range(1, min(NEIGHBOURS, n - 1) + 1):
        a, b = slice(0, n - k), slice(k, n)
        m = (agent[a] == agent[b]) & (bucket[a] == bucket[b]) & nb_ok[a] & nb_ok[b]
        m &= (addr[b] < end_[a]) & (addr[a] < end_[b])
        m &= (shard_rank[a] != shard_rank[b]) | (xfer[a] != xfer[b])
        ia = np.nonzero(m)[0]
        ib = ia + k
        # drop the pair when either transfer is known over before the other's post
        drop = over_before(ia, psidx[ib], post[ib], post_ok[ib]) | over_before(ib, psidx[ia], post[ia], post_ok[ia])
        As.append(ia[~drop])
        Bs.append(ib[~drop])
    if not As:
        return empty_pairs(ends)
    return pairs_table(ends, order[np.concatenate(As)], order[np.concatenate(Bs)])
