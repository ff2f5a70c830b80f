"""inflight_pairs, built with numpy: pairs of descriptor ends of two different transfers
that overlap in bytes on the same agent while both are in flight (neither transfer is
known to have ended — done, error or notification — before the other was posted).

Candidates: per agent and 64 KiB address bucket, ends sorted by (addr, post time, shard,
post seq, pos, side); each end is compared with its next 4 neighbours in that order (a
linear-cost sweep; t_ns only orders candidates, happens-before decides). Overlaps further
apart than 4 neighbours, or across a bucket boundary, are not examined.

One lexsort and four shifted comparisons replace SQL's row_number window and its
self-join (at 1M events ~10 s of a window over 1.4M ends and a 5.3M-row join); the
happens-before filter is a sorted-key lookup instead of two hash joins. The ends are read
as integers (end_hold_ids' ids, queries/inflight_ends.sql) and only the pairs found are
named (Names): at 10M events, 13.6M ends and no pair.

Columns (as before, one row per pair):
  agent VARCHAR
  a_shard, a_xfer, a_side, a_request, a_post  -- the earlier-sorted end
  b_shard, b_xfer, b_side, b_request, b_post  -- the later-sorted end
  pool VARCHAR, layer INTEGER, slot BIGINT     -- where (from a's layout position)
  lo UBIGINT, hi UBIGINT                       -- overlapping byte range
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc  # noqa: F401  (pa.ipc)

NEIGHBOURS = 4
BUCKET = 65536
#: ends swept at once; past it, ranges of address buckets (queries/inflight_blocks.sql)
CHUNK_ROWS = 8_000_000
#: the sweep's Python memory per end (sort keys, shifted comparisons, the pairs): ~210
#: bytes measured at 10M events (8M ends: 1.7 GB beside DuckDB's share)
BYTES_PER_END = 256
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


def pairs_table(ends: pa.Table, a: np.ndarray, b: np.ndarray, names: Names) -> pa.Table:
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
    })


class Seen:
    """When each shard knows each transfer over (xfer_seen.end_seq), for vectorised
    lookups by (transfer, shard): a dense table when transfers × shards is small enough
    (one gather per lookup), else a sorted key (a binary search per lookup)."""

    def __init__(self, seen: pa.Table, shards: list[str], direct_max: int = DIRECT_MAX) -> None:
        self.shards = pa.array(shards, pa.string())
        s_shard, s_xfer = self.shard_ix(seen.column("shard")), _np(seen.column("xfer"), 0, np.int64)
        s_side, s_end = _np(seen.column("side_sidx"), -1, np.int64), _np(seen.column("end_seq"), 0, np.int64)
        self.ux = np.unique(s_xfer)                  # transfer ids some shard knows over
        self.nx, self.ns = len(self.ux) + 1, len(shards) + 1
        pair = (s_shard + 1) * self.nx + np.searchsorted(self.ux, s_xfer)
        self.ut = np.unique(pair)                    # (shard, transfer)s: dense ids
        key = np.searchsorted(self.ut, pair) * self.ns + (s_side + 1)
        if len(self.ut) * self.ns <= direct_max:
            self.has = np.zeros(len(self.ut) * self.ns, bool)
            self.end = np.zeros(len(self.ut) * self.ns, np.int64)
            self.has[key], self.end[key] = True, s_end
            self.key = None
        else:
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
        if not len(self.end):
            return np.zeros(len(tkey), bool)
        valid = (tkey >= 0) & (on >= 0) & (on < self.ns - 1) & ok
        k = np.where(valid, tkey * self.ns + (on + 1), 0)
        if self.key is None:
            return valid & self.has[k] & (self.end[k] <= seq)
        at = np.minimum(np.searchsorted(self.key, k), len(self.key) - 1)
        return valid & (self.key[at] == k) & (self.end[at] <= seq)


def _index_dtype(n: int):
    return np.int32 if n < 2**31 else np.int64


def inflight_pairs(ends: pa.Table, seen: Seen, names: Names) -> pa.Table:
    """The pairs (see module doc) among the ends (queries/inflight_ends.sql: all of them,
    or whole (agent, bucket) groups of them), named by ``names``."""
    n = ends.num_rows
    if n < 2:
        return empty_pairs(ends, names)
    col = ends.column
    # the shard's rank among the names (ORDER BY shard) from its index: psidx indexes the
    # model's shard list, which need not be in name order
    shard_names = seen.shards.to_pylist()
    rank_of = np.empty(len(shard_names) + 1, np.int64)
    rank_of[np.argsort(np.array(shard_names, dtype=object), kind="stable")] = np.arange(len(shard_names))
    rank_of[len(shard_names)] = len(shard_names)
    psidx = _np(col("psidx"), -1, np.int64)
    psidx = np.where((psidx >= 0) & (psidx < len(shard_names)), psidx, len(shard_names))
    agent = _np(col("agent_code"), 0, np.int64)
    # ORDER BY addr, t_ns, shard, post_seq, pos, side within (agent, addr bucket): the bucket
    # follows addr. Null flags (nulls last) only for columns that have nulls.
    keys = []
    for name, val in (("side_code", None), ("pos", None), ("post_seq", None), ("psidx", rank_of[psidx]), ("t_ns", None)):
        keys.append(val if val is not None else _np(col(name), 0))
        if col(name).null_count:
            keys.append(_nulls(col(name)))
    addr = _np(col("addr"), 0, np.uint64)
    order = np.lexsort(keys + [addr, agent])
    del keys
    # every per-end array in sorted order: the k-th neighbour of sorted row i is row i + k.
    # Gathers by a random permutation are the sweep's main cost, so the agent (the first
    # sort key) is rebuilt from its counts, and null masks only gathered where there are nulls.
    counts = np.bincount(agent)          # agent codes: ids from 1 (inflight_ends.sql)
    codes = np.nonzero(counts)[0]
    agent = np.repeat(codes, counts[codes])
    addr, psidx = addr[order], psidx[order]
    shard_rank = rank_of[psidx]
    bucket = addr // np.uint64(BUCKET)
    nb_ok = ~_nulls(col("nbytes"))[order] if col("nbytes").null_count else np.ones(n, bool)
    end_ = addr + _np(col("nbytes"), 0, np.uint64)[order]
    xfer = _np(col("xfer"), 0, np.int64)[order]
    post = _np(col("post_seq"), 0, np.int64)[order]
    post_ok = ~_nulls(col("post_seq"))[order] if col("post_seq").null_count else np.ones(n, bool)
    tkey = seen.transfer_keys(psidx, xfer)

    As, Bs = [], []
    for k in range(1, min(NEIGHBOURS, n - 1) + 1):
        a, b = slice(0, n - k), slice(k, n)
        m = (agent[a] == agent[b]) & (bucket[a] == bucket[b]) & nb_ok[a] & nb_ok[b]
        m &= (addr[b] < end_[a]) & (addr[a] < end_[b])
        m &= (shard_rank[a] != shard_rank[b]) | (xfer[a] != xfer[b])
        ia = np.nonzero(m)[0]
        ib = ia + k
        # drop the pair when either transfer is known over before the other's post (the
        # second lookup only for the pairs the first keeps: on a clean trace it drops most)
        keep = ~seen.over_by(tkey[ia], psidx[ib], post[ib], post_ok[ib])
        ia, ib = ia[keep], ib[keep]
        keep = ~seen.over_by(tkey[ib], psidx[ia], post[ia], post_ok[ia])
        As.append(ia[keep])
        Bs.append(ib[keep])
    return pairs_table(ends, order[np.concatenate(As)], order[np.concatenate(Bs)], names)


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
