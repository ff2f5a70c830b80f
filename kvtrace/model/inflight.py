"""inflight_pairs, built with numpy: pairs of descriptor ends of two different transfers
that overlap in bytes on the same agent while both are in flight (neither transfer is
known to have ended — done, error or notification — before the other was posted).

Candidates: per agent and 64 KiB address bucket, ends sorted by (addr, post time, shard
name, post seq, pos, side; nulls last); each end is compared with its next 4 neighbours in
that order (a linear-cost sweep; t_ns only orders candidates, happens-before decides).
Overlaps further apart than 4 neighbours, or across a bucket boundary, are not examined.

One sort and four shifted comparisons replace SQL's row_number window and its self-join
(at 1M events ~10 s of a window over 1.4M ends and a 5.3M-row join); the happens-before
filter is a table lookup instead of two hash joins. The ends are read as integers
(end_hold_ids' ids, queries/inflight_ends.sql) and only the pairs found are named (Names):
at 10M events, 13.6M ends and no pair.

The sort is one argsort of the sort keys packed into 64-bit words (sortkey.py: each key in
the bits its range needs; where the first word ties, the next ones order those rows), not
a lexsort of 7 to 12 keys. The sweep goes a block of sorted rows at a time: each block's
rows are gathered from one per-end matrix (row-major: one random read per end, not one per
column) and compared while in cache. Whole-column temporaries were new memory each time,
and a first touch of new memory costs system time (the 10M trace's sweep, old vs new:
~4.3 vs ~2.3 user s, ~5.5 vs ~2.6 sys s, 106K vs 2.3K page faults: bench/results/checks.txt).
Where the dense table of when each shard knows each transfer over can hold sentinels
(Seen.exact), a lookup is one gather (later_than); else over_by() as before.

Columns (as before, one row per pair):
  agent VARCHAR
  a_shard, a_xfer, a_side, a_request, a_post  -- the earlier-sorted end
  b_shard, b_xfer, b_side, b_request, b_post  -- the later-sorted end
  pool VARCHAR, layer INTEGER, slot BIGINT     -- where (from a's layout position)
  lo UBIGINT, hi UBIGINT                       -- overlapping byte range
  a_pos, b_pos INTEGER                         -- each end's descriptor (its position in its
                                               -- transfer: desc_hold_ids' pos), for readers
                                               -- of what the end's descriptor carries
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc  # noqa: F401  (pa.ipc)

from . import sortkey

NEIGHBOURS = 4
BUCKET = 65536
#: ends swept at once; past it, ranges of address buckets (queries/inflight_blocks.sql)
CHUNK_ROWS = 8_000_000
#: the sweep's Python memory per end: ~210 bytes measured at 10M events with the lexsort
#: sweep (8M ends: 1.7 GB beside DuckDB's share); the blocked sweep takes ~80 (sort words,
#: order, per-end matrix) beside the ends' Arrow table (10M: 1.23 GB peak). Kept, so the
#: ranges under a cap are the same
BYTES_PER_END = 256
#: sorted rows per block of the sweep (inflight_pairs: 14 numpy calls per neighbour and
#: block; 16K rows keep a block's columns in cache)
BLOCK = 1 << 14
#: rows per block of its first pass (the sort words and the per-end matrix)
FILL_ROWS = 1 << 16
#: the share of the memory cap the sweep may take beside DuckDB's buffers
CAP_SHARE = 0.25
#: rows per batch when the ranges' ends are read in one scan (build: stream)
STREAM_ROWS = 1 << 18
#: from this many ranges on they are read in one scan (build: stream): one range's query
#: costs about 1/24 of the scan and split (10M events, 50 ranges: 0.16 vs 3.8 cpu-s, in
#: memory and out of core alike; both grow with the ends), so a few ranges (10M events in
#: memory: 2) keep their own queries
STREAM_MIN_RANGES = 24


def chunk_rows(cap_bytes: int) -> int:
    """Ends swept at once under a memory cap of ``cap_bytes``: CHUNK_ROWS at most."""
    return max(1 << 18, min(CHUNK_ROWS, int(cap_bytes * CAP_SHARE / BYTES_PER_END)))


#: (shard, transfer) × shards entries up to which the end lookup is a dense table (256 MB)
DIRECT_MAX = 1 << 25


def _np(col: pa.ChunkedArray, fill=0, dtype=None) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if arr.null_count:
        arr = pc.fill_null(arr, fill)
    out = arr.to_numpy(zero_copy_only=False)
    return out.astype(dtype, copy=False) if dtype is not None else out


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


class Names:
    """The names behind the sweep's integer ends (inflight_names.sql: id_names' lists), and
    the requests of the transfers the pairs name (inflight_requests.sql, asked for only
    when there are pairs): the sweep reads ids only, and names what it returns."""

    def __init__(self, ask) -> None:
        row = ask("inflight_names")
        get = lambda c: pa.array(row.column(c)[0].as_py() or [], pa.string()) if row.num_rows else pa.array([], pa.string())  # noqa: E731
        self.shards, self.agents, self.pools = get("shards"), get("agents"), get("pools")
        self.ask = ask

    @staticmethod
    def _take(names: pa.Array, ix: pa.Array, base: int) -> pa.Array:
        """names[ix - base]; null where ix is null or out of range (as SQL's list index)."""
        i = pc.subtract(ix.cast(pa.int64()), base)
        i = pc.if_else(pc.and_(pc.greater_equal(i, 0), pc.less(i, len(names))), i, pa.scalar(None, pa.int64()))
        return names.take(i)

    def requests(self, psidx: pa.Array, xfer: pa.Array, post: pa.Array) -> pa.Array:
        """The request of each posting (initiator shard index, transfer id, post seq: unique,
        even where a trace posts one transfer id twice); null: none."""
        if not len(xfer):
            return pa.array([], pa.string())
        key = ["sidx", "xfer", "post_seq"]
        q = pa.table({"sidx": psidx.cast(pa.int32()), "xfer": xfer.cast(pa.int64()),
                      "post_seq": post.cast(pa.int64()), "i": pa.array(np.arange(len(xfer)), pa.int64())})
        keys = q.select(key).group_by(key).aggregate([])
        got = self.ask("inflight_requests", [keys.column(k).to_pylist() for k in key])
        got = got.select(key + ["request"]).cast(pa.schema([("sidx", pa.int32()), ("xfer", pa.int64()),
                                                            ("post_seq", pa.int64()), ("request", pa.string())]))
        return q.join(got, key, join_type="left outer").sort_by("i").column("request").combine_chunks()


def empty_pairs(ends: pa.Table, names: Names) -> pa.Table:
    return pairs_table(ends, np.empty(0, np.int64), np.empty(0, np.int64), names)


def take_rows(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """table's ``rows`` (in that order), taken chunk by chunk: a take from a column of many
    chunks concatenates them first (10M events: ~0.2 s for the pairs' 16 takes, even of none)."""
    batches = table.to_batches()
    if not len(rows) or not batches:
        return table.schema.empty_table()
    starts = np.cumsum([0] + [b.num_rows for b in batches])
    by = np.argsort(rows, kind="stable")
    at = rows[by]
    cut = np.searchsorted(at, starts)
    parts = [batches[j].take(pa.array(at[cut[j]:cut[j + 1]] - starts[j]))
             for j in range(len(batches)) if cut[j + 1] > cut[j]]
    back = np.empty(len(rows), np.int64)
    back[by] = np.arange(len(rows))
    return pa.Table.from_batches(parts, table.schema).take(pa.array(back))


def pairs_table(ends: pa.Table, a: np.ndarray, b: np.ndarray, names: Names) -> pa.Table:
    if 8 * (len(a) + len(b)) <= ends.num_rows:   # few: their rows first (take_rows), then each column's
        ends = take_rows(ends, np.concatenate([a, b]))
        a, b = np.arange(len(a)), np.arange(len(a), len(a) + len(b))
    ta, tb = pa.array(a, pa.int64()), pa.array(b, pa.int64())
    c = lambda name, t: ends.column(name).take(t).combine_chunks()  # noqa: E731
    a_addr, b_addr = _np(c("addr", ta), 0, np.uint64), _np(c("addr", tb), 0, np.uint64)
    a_n, b_n = _np(c("nbytes", ta), 0, np.uint64), _np(c("nbytes", tb), 0, np.uint64)
    side = pa.array(["dst", "src"], pa.string())
    a_sidx, b_sidx, a_x, b_x = c("psidx", ta), c("psidx", tb), c("xfer", ta), c("xfer", tb)
    a_post, b_post = c("post_seq", ta), c("post_seq", tb)
    req = names.requests(pa.concat_arrays([a_sidx.cast(pa.int32()), b_sidx.cast(pa.int32())]),
                         pa.concat_arrays([a_x.cast(pa.int64()), b_x.cast(pa.int64())]),
                         pa.concat_arrays([a_post.cast(pa.int64()), b_post.cast(pa.int64())]))
    return pa.table({
        "agent": Names._take(names.agents, c("agent_code", ta), 1),
        "a_shard": Names._take(names.shards, a_sidx, 0), "a_xfer": a_x,
        "a_side": Names._take(side, c("side_code", ta), 0),
        "a_request": req.slice(0, len(a)), "a_post": a_post,
        "b_shard": Names._take(names.shards, b_sidx, 0), "b_xfer": b_x,
        "b_side": Names._take(side, c("side_code", tb), 0),
        "b_request": req.slice(len(a)), "b_post": b_post,
        "pool": Names._take(names.pools, c("pid", ta), 1), "layer": c("layer", ta), "slot": c("slot", ta),
        "lo": pa.array(np.maximum(a_addr, b_addr), pa.uint64()),
        "hi": pa.array(np.minimum(a_addr + a_n, b_addr + b_n), pa.uint64()),
        "a_pos": c("pos", ta), "b_pos": c("pos", tb),
    })


class Seen:
    """When each shard knows each transfer over (xfer_seen.end_seq), for vectorised
    lookups by (transfer, shard): a dense table when transfers × shards is small enough
    (one gather per lookup), else a sorted key (a binary search per lookup)."""

    #: the dense table's "not known over" (its rows: the transfers some shard knows over, then
    #: one for every other transfer; its columns: the shards, then one for an unknown shard)
    NEVER = np.iinfo(np.int64).max

    def __init__(self, seen: pa.Table, shards: list[str], direct_max: int = DIRECT_MAX) -> None:
        self.shards = pa.array(shards, pa.string())
        s_shard, s_xfer = self.shard_ix(seen.column("shard")), _np(seen.column("xfer"), 0, np.int64)
        s_side, s_end = _np(seen.column("side_sidx"), -1, np.int64), _np(seen.column("end_seq"), 0, np.int64)
        self.ux = np.unique(s_xfer)                  # transfer ids some shard knows over
        self.nx, self.ns = len(self.ux) + 1, len(shards) + 1
        pair = (s_shard + 1) * self.nx + np.searchsorted(self.ux, s_xfer)
        self.ut = np.unique(pair)                    # (shard, transfer)s: dense ids
        t = np.searchsorted(self.ut, pair)
        if len(self.ut) * self.ns <= direct_max:
            # row t, column side: the end seq; a lookup on a side that is no shard (side_sidx
            # null, or an unknown shard's index: len(shards)) reads NEVER, as does one of a
            # transfer no shard knows over (the last row)
            on = (s_side >= 0) & (s_side < len(shards))
            key = t[on] * self.ns + s_side[on]
            self.tab = np.full((len(self.ut) + 1) * self.ns, self.NEVER, np.int64)
            self.has = np.zeros(len(self.tab), bool)
            self.tab[key], self.has[key] = s_end[on], True
            self.lowest = int(s_end[on].min()) if on.any() else self.NEVER   # the least end seq in tab
            self.key = None
        else:
            key = t * self.ns + (s_side + 1)
            order = np.argsort(key, kind="stable")
            self.key, self.end = key[order], s_end[order]
        # dense lookups for transfer_keys when they fit (a gather per end instead of two
        # binary searches: ~2 s of 13.6M ends at 10M events): transfer id -> its index in
        # ux when the ids are dense enough, (shard, transfer) -> its index in ut
        self.x_lo, self.x_lut = 0, None
        if len(self.ux):
            span = int(self.ux[-1]) - int(self.ux[0]) + 1
            if span <= min(direct_max, max(4 * len(self.ux), 1 << 16)):
                self.x_lo = int(self.ux[0])
                self.x_lut = np.full(span, -1, _index_dtype(len(self.ux)))
                self.x_lut[self.ux - self.x_lo] = np.arange(len(self.ux))
        self.p_lut = None
        if self.ns * self.nx <= direct_max:
            self.p_lut = np.full(self.ns * self.nx, -1, _index_dtype(len(self.ut)))
            self.p_lut[self.ut] = np.arange(len(self.ut))

    def shard_ix(self, col) -> np.ndarray:
        return _np(pc.index_in(col, value_set=self.shards), -1, np.int64)

    def transfer_keys(self, shard: np.ndarray, xfer: np.ndarray) -> np.ndarray:
        """Each (shard index, transfer id)'s dense id; -1: no shard knows it over."""
        if not len(self.ut):
            return np.full(len(xfer), -1, np.int64)
        if self.x_lut is not None:
            inr = (xfer >= self.x_lo) & (xfer < self.x_lo + len(self.x_lut))
            dx = np.where(inr, self.x_lut[np.where(inr, xfer - self.x_lo, 0)], -1).astype(np.int64)
        else:
            dx = np.minimum(np.searchsorted(self.ux, xfer), len(self.ux) - 1)
            dx = np.where(self.ux[dx] == xfer, dx, -1)
        ok = (dx >= 0) & (shard >= 0) & (shard < self.ns - 1)
        pair = np.where(ok, (shard + 1) * self.nx + dx, 0)
        if self.p_lut is not None:
            t = self.p_lut[pair].astype(np.int64)
        else:
            t = np.minimum(np.searchsorted(self.ut, pair), len(self.ut) - 1)
            t = np.where(self.ut[t] == pair, t, -1)
        return np.where(ok, t, -1)

    def over_by(self, tkey: np.ndarray, on: np.ndarray, seq: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """The transfers ``tkey`` are known over on shard ``on`` by its seq ``seq`` (where ``ok``)."""
        valid = (tkey >= 0) & (on >= 0) & (on < self.ns - 1) & ok
        if self.key is None:
            k = np.where(valid, tkey * self.ns + on, 0)
            return valid & self.has[k] & (self.tab[k] <= seq)
        if not len(self.end):
            return np.zeros(len(tkey), bool)
        k = np.where(valid, tkey * self.ns + (on + 1), 0)
        at = np.minimum(np.searchsorted(self.key, k), len(self.key) - 1)
        return valid & (self.key[at] == k) & (self.end[at] <= seq)

    def exact(self, post_max: int | None, post_nulls: bool) -> bool:
        """Whether later_than() is exact for ends whose posts' seqs reach ``post_max`` (None:
        no post), some null where ``post_nulls``: the table is dense and no sentinel meets a
        real value (a post at int64's largest seq would be after NEVER; a null post, read as
        int64's least, would be after an end seq at its least). Else over_by()."""
        if self.key is not None or post_max == self.NEVER:
            return False
        return not (post_nulls and self.lowest == np.iinfo(np.int64).min)

    def rows(self, tkey: np.ndarray) -> np.ndarray:
        """The dense table's offset of each transfer (tkey: transfer_keys') for later_than()."""
        return np.where(tkey >= 0, tkey, len(self.ut)) * self.ns

    def later_than(self, rows: np.ndarray, on: np.ndarray, seq: np.ndarray) -> np.ndarray:
        """Not over_by(): the transfers at ``rows`` (rows()) are not known over on shard ``on``
        (an index; len(shards): unknown) by its seq ``seq`` (a null post: int64's least)."""
        return self.tab[rows + on] > seq


def _index_dtype(n: int):
    return np.int32 if n < 2**31 else np.int64


def _range(col: pa.ChunkedArray) -> tuple[int | None, int | None]:
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py()


def _keys(ends: pa.Table, ranks: np.ndarray) -> list[tuple[str, sortkey.Key]]:
    """The sweep's order, most significant first: agent, addr, then t_ns, shard (by
    ``ranks``: each present shard index's rank among the names), post_seq, pos, side, each
    after its null flag where the column has nulls (nulls last, as SQL's ORDER BY). A
    name "?col" is the null flag of col."""
    col = ends.column
    out = []
    for name in ("agent_code", "addr", "t_ns", "psidx", "post_seq", "pos", "side_code"):
        nulls = col(name).null_count > 0
        if nulls and name not in ("agent_code", "addr"):   # those two: never null (inflight_ends.sql)
            out.append(("?" + name, sortkey.Key(0, 1, False)))
        if name == "psidx":
            lo, hi = (int(ranks.min()), int(ranks.max())) if len(ranks) else (0, 0)
        else:
            lo, hi = _range(col(name))
        out.append((name, sortkey.Key.of(lo, hi, name != "addr", nulls)))
    return out


#: the sweep's per-end matrix (rows in the query's order; a block of sorted rows at a time
#: is gathered from it): its columns. RUN: the agent's code (its low 16 bits) and the address
#: bucket, equal for the ends of one (agent, bucket); AGENT only where codes reach 2**16
_RUN, _ADDR, _END, _SHARD, _XFER, _POST, _TKEY = range(7)
#: FLAGS (where nbytes or, for over_by(), post_seq has nulls): bits nbytes / post_seq not null
_NB_OK, _POST_OK = 1, 2


def inflight_pairs(ends: pa.Table, seen: Seen, names: Names) -> pa.Table:
    """The pairs (see module doc) among the ends (queries/inflight_ends.sql: all of them,
    or whole (agent, bucket) groups of them), named by ``names``. Its passes go a block of
    rows at a time (their temporaries stay in cache and are never new memory); only the
    sort words, the order and the per-end matrix are as long as the ends."""
    n = ends.num_rows
    if n < 2:
        return empty_pairs(ends, names)
    col = ends.column
    # the shard's rank among the names (ORDER BY shard) from its index: psidx indexes the
    # model's shard list, which need not be in name order; an unknown shard ranks last
    nshards = len(seen.shards)
    rank_of = np.empty(nshards + 1, np.int64)
    rank_of[np.argsort(np.array(seen.shards.to_pylist(), dtype=object), kind="stable")] = np.arange(nshards)
    rank_of[nshards] = nshards
    present = _np(pc.unique(col("psidx")), -1, np.int64)
    keys = _keys(ends, rank_of[np.where((present >= 0) & (present < nshards), present, nshards)])
    packing = sortkey.Packing([k for _, k in keys])
    words = [np.empty(n, np.uint64) for _ in range(packing.nwords)]
    # the lookup of when transfers are known over: sentinels in a dense table (later_than)
    # where that is exact, else over_by()
    post_nulls = col("post_seq").null_count > 0
    dense = seen.exact(_range(col("post_seq"))[1], post_nulls)
    flags = col("nbytes").null_count > 0 or (post_nulls and not dense)
    lo, hi = _range(col("agent_code"))
    wide = (hi or 0) >= 1 << 16 or (lo or 0) < 0   # codes RUN's 16 bits would not tell apart
    ncol = _TKEY + 1 + flags + wide
    _FLAGS, _AGENT = _TKEY + 1, ncol - 1
    mat = np.empty((n, ncol), np.uint64)
    imat = mat.view(np.int64)
    at = 0
    for batch in ends.to_batches(max_chunksize=FILL_ROWS):
        e = at + batch.num_rows
        c = batch.column
        ps = _np(c("psidx"), -1, np.int64)
        ps = np.where((ps >= 0) & (ps < nshards), ps, nshards)
        packing.fill([w[at:e] for w in words],
                     [_nulls(c(name[1:])) if name[0] == "?" else rank_of[ps] if name == "psidx" else _np(c(name), 0)
                      for name, _ in keys])
        agent, addr = _np(c("agent_code"), 0, np.int64), _np(c("addr"), 0, np.uint64)
        xfer, post = _np(c("xfer"), 0, np.int64), _np(c("post_seq"), 0, np.int64)
        tkey = seen.transfer_keys(ps, xfer)
        if dense:
            tkey = seen.rows(tkey)
            if post_nulls:   # a null post: no transfer is known over by it
                post = np.where(_nulls(c("post_seq")), np.iinfo(np.int64).min, post)
        mat[at:e, _RUN] = (agent.astype(np.uint64) & np.uint64(0xFFFF)) << np.uint64(48) | addr // np.uint64(BUCKET)
        mat[at:e, _ADDR] = addr
        mat[at:e, _END] = addr + _np(c("nbytes"), 0, np.uint64)
        imat[at:e, _SHARD], imat[at:e, _XFER], imat[at:e, _POST], imat[at:e, _TKEY] = ps, xfer, post, tkey
        if flags:
            imat[at:e, _FLAGS] = np.where(_nulls(c("nbytes")), 0, _NB_OK) | np.where(_nulls(c("post_seq")), 0, _POST_OK)
        if wide:
            imat[at:e, _AGENT] = agent
        at = e
    order = sortkey.order(words, n)
    del words

    pairs: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(NEIGHBOURS)]
    block = BLOCK
    rows = np.empty((block + NEIGHBOURS, ncol), np.uint64)
    cols = np.empty((ncol, block + NEIGHBOURS), np.uint64)
    for s in range(0, n, block):
        # sorted rows s.. and their next NEIGHBOURS: the k-th neighbour of row i is i + k
        take = order[s:s + block + NEIGHBOURS]
        m_ = len(take)
        np.take(mat, take, axis=0, out=rows[:m_])
        g = cols[:, :m_]
        np.copyto(g, rows[:m_].T)
        gi = g.view(np.int64)
        run, addr, end_, ps, xfer, post, tkey = g[_RUN], g[_ADDR], g[_END], gi[_SHARD], gi[_XFER], gi[_POST], gi[_TKEY]
        for k in range(1, NEIGHBOURS + 1):
            cnt = min(block, m_ - k)
            if cnt <= 0:
                break
            a, b = slice(0, cnt), slice(k, k + cnt)
            m = run[a] == run[b]
            if wide:
                m &= g[_AGENT][a] == g[_AGENT][b]
            if flags:
                m &= (g[_FLAGS][a] & g[_FLAGS][b] & np.uint64(_NB_OK)) != 0
            m &= addr[b] < end_[a]
            m &= addr[a] < end_[b]
            m &= (ps[a] != ps[b]) | (xfer[a] != xfer[b])
            # drop the pair when either transfer is known over before the other's post: a's
            # over every candidate (on a clean trace it drops most), b's over those kept
            if dense:
                m &= seen.later_than(tkey[a], ps[b], post[b])
                ia = np.flatnonzero(m)
                ib = ia + k
                keep = seen.later_than(tkey[ib], ps[ia], post[ia])
            else:
                ia = np.flatnonzero(m)
                ib = ia + k
                ok = (g[_FLAGS] & np.uint64(_POST_OK)) != 0 if flags else np.ones(m_, bool)
                keep = ~seen.over_by(tkey[ia], ps[ib], post[ib], ok[ib])
                ia, ib = ia[keep], ib[keep]
                keep = ~seen.over_by(tkey[ib], ps[ia], post[ia], ok[ia])
            if keep.any():
                pairs[k - 1].append((ia[keep] + s, ib[keep] + s))
    # the pairs by neighbour distance, then sorted position (the order np.lexsort's sweep gave)
    found = [p for per in pairs for p in per]
    ia = np.concatenate([p[0] for p in found]) if found else np.empty(0, np.int64)
    ib = np.concatenate([p[1] for p in found]) if found else np.empty(0, np.int64)
    return pairs_table(ends, order[ia], order[ib], names)


def chunks(blocks: pa.Table, limit: int) -> list[tuple[int, int, int]]:
    """Ranges (agent id, first bucket, end bucket) of consecutive address buckets of one agent
    with at most ``limit`` ends each (a single larger bucket is a range of its own), from
    the per (agent, bucket) counts of queries/inflight_blocks.sql. The sweep compares ends
    within one bucket only, so ranges of whole buckets give the pairs of one sweep."""
    out: list[tuple[int, int, int]] = []
    cur, rows = None, 0
    for agent, block, n in zip(*(blocks.column(c).to_pylist() for c in ("agent", "block", "n"))):
        if cur and cur[0] == agent and rows + n <= limit:
            cur[2], rows = block + 1, rows + n
            continue
        if cur:
            out.append(tuple(cur))
        cur, rows = [agent, block, block + 1], n
    if cur:
        out.append(tuple(cur))
    return out


def build(ask, shards: list[str], limit: int = CHUNK_ROWS, direct_max: int = DIRECT_MAX,
          stream=None, spill_dir: str | None = None, stream_min: int = STREAM_MIN_RANGES) -> pa.Table:
    """inflight_pairs of a model (``ask``: its named-query runner, TraceModel.ask): in one
    sweep, or — past ``limit`` ends — one sweep per range of address buckets, so memory
    stays bounded however large the trace.

    ``stream`` (a named query's rows as a pyarrow RecordBatchReader) and ``spill_dir``: from
    ``stream_min`` ranges on, the ranges' ends are read in one scan of end_hold_ids, each batch's
    rows appended to its range's Arrow file in a folder under ``spill_dir`` (removed after),
    instead of one query per range: every range query scans all of end_hold_ids (10M events under a 300 MB
    cap: 50 ranges, ~8 of the sweep's ~12 cpu-s; the count of ranges is the trace's ends
    over the cap's share, so at 100M under 3 GB as many scans of ten times the rows)."""
    seen = Seen(ask("inflight_seen"), shards, direct_max)
    names = Names(ask)
    if ask("inflight_count").column(0)[0].as_py() <= limit:
        return inflight_pairs(ask("inflight_ends"), seen, names)
    ranges = chunks(ask("inflight_blocks"), limit)
    if stream is None or spill_dir is None or len(ranges) < stream_min:
        parts = [inflight_pairs(ask("inflight_ends_range", [agent, lo, hi]), seen, names) for agent, lo, hi in ranges]
        return pa.concat_tables(parts)
    os.makedirs(spill_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="inflight-", dir=spill_dir) as folder:
        files = split_ranges(stream("inflight_ends"), ranges, folder)
        parts = []
        for path in files:   # one range in memory at a time, as its own query gave it
            with pa.OSFile(path) as src:
                ends = pa.ipc.open_file(src).read_all()
            os.remove(path)
            parts.append(inflight_pairs(ends, seen, names))
            del ends
    return pa.concat_tables(parts)


def split_ranges(reader, ranges: list[tuple[int, int, int]], folder: str) -> list[str]:
    """Write the ends of ``reader`` (queries/inflight_ends.sql's rows, batch by batch) into
    one Arrow file per range of ``ranges`` (chunks(): (agent, first bucket, end bucket),
    covering every (agent, bucket) with ends); the files' paths, in the order of ``ranges``.
    A range holds one agent, so its rows all have one agent_code (the sweep's first sort
    key: equal codes, as one range's own query gives)."""
    per: dict[str, tuple[list, list, list]] = {}
    for k, (agent, lo, hi) in enumerate(ranges):   # per agent, its ranges in bucket order
        ks, starts, ends = per.setdefault(agent, ([], [], []))
        ks.append(k)
        starts.append(lo)
        ends.append(hi)
    los = {a: (np.array(ks, np.int64), np.array(st, np.uint64), np.array(en, np.uint64))
           for a, (ks, st, en) in per.items()}
    paths = [os.path.join(folder, f"{k:05d}.arrow") for k in range(len(ranges))]
    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
    try:
        for batch in reader:
            n = batch.num_rows
            if not n:
                continue
            bucket = _np(batch.column("addr"), 0, np.uint64) // np.uint64(BUCKET)
            agents = _np(batch.column("agent_code"), 0, np.int64)
            rng = np.full(n, -1, np.int64)
            for agent, (ks, starts, ends) in los.items():
                m = agents == agent
                if m.any():
                    b = bucket[m]
                    i = np.maximum(np.searchsorted(starts, b, side="right") - 1, 0)
                    rng[m] = np.where((starts[i] <= b) & (b < ends[i]), ks[i], -1)
            order = np.argsort(rng, kind="stable")
            present, first = np.unique(rng[order], return_index=True)
            for k, a, b in zip(present, first, list(first[1:]) + [n]):
                if k < 0:   # in no range (as no range's query returns it): not swept
                    continue
                if k not in writers:
                    writers[k] = pa.ipc.new_file(paths[k], batch.schema)
                writers[k].write_batch(batch.take(pa.array(order[a:b])))
    finally:
        for w in writers.values():
            w.close()
    schema = reader.schema
    for k, path in enumerate(paths):
        if k not in writers:   # a range whose ends the scan did not return: none
            with pa.ipc.new_file(path, schema):
                pass
    return paths
