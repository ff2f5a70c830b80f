"""The timeline: every event of every shard in one happens-before-consistent total order,
written once beside the trace index (``timeline.parquet``, sorted by a dense ``ord``,
with each receive's paired send), so a viewer pages it by row group.

Every event gets a key ``T``: its own timestamp, raised to at least the key of the
event before it in its shard, and to one more than the key of the send a receive
pairs with (a Lamport clock weighted by real time). Sorting by ``(T, shard, seq)``
keeps program order and puts every receive after its send, whatever the shard clocks
say; among concurrent events the timestamps decide, which reads naturally. The pairs
are the model's ``sync_pairs``, the same ones the checks and replay use.

The file is rebuilt when the index's ``stamp.json`` (or this module's version) changes.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import merge
from .sqltext import query_sql

VERSION = 3
FILE = "timeline.parquet"
STAMP = "timeline_stamp.json"
#: threads reading the index's seq and t_ns (one file each)
READERS = 2
#: seconds of the last build's parts (for bench/bench_tui.py)
TIMES: dict[str, float] = {}


def hb_keys(shard_of: np.ndarray, t_ns: np.ndarray, bounds) -> tuple[np.ndarray, int]:
    """Happens-before keys for events given in per-shard program order.

    Args:
        shard_of: shard index of each event; each shard's events contiguous, in seq order.
        t_ns: each event's timestamp.
        bounds: (receive row, send row) pairs (a list of tuples or an (n, 2) array): the
            receive must sort after the send.
    Returns:
        (keys, broken): keys nondecreasing within a shard and key[recv] > key[send];
        ``broken`` counts receive edges dropped because they formed a cycle (a corrupt
        trace), which keeps the order total instead of failing.

    Each shard is keyed in segments: from its next unkeyed row up to its next receive
    whose send has no key yet (one running max per segment). Rounds visit the shards in
    turn until all are keyed; when none can move, the waiting receive whose shard's next
    event is earliest loses its edge. Checking which receives are ready is vectorized, so
    the cost is a few numpy calls per segment, not Python work per edge.
    """
    t_ns = np.asarray(t_ns)
    n = len(t_ns)
    keys = np.empty(n, dtype=np.int64)
    shard_of = np.asarray(shard_of)
    starts = np.flatnonzero(np.r_[True, shard_of[1:] != shard_of[:-1]]) if n else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], n].astype(np.int64)
    e = np.asarray(bounds, dtype=np.int64).reshape(-1, 2)
    e = e[np.lexsort((e[:, 1], e[:, 0]))]          # by receive row, then send row
    recv, send = e[:, 0], e[:, 1]
    recv_shard = np.searchsorted(starts, recv, side="right") - 1
    send_shard = np.searchsorted(starts, send, side="right") - 1
    # per shard: the slice [first[k], last[k]) of the edges whose receive is in it
    first = np.searchsorted(recv_shard, np.arange(len(starts)), side="left")
    last = np.searchsorted(recv_shard, np.arange(len(starts)), side="right")
    pos = starts.astype(np.int64).copy()          # next unkeyed row of each shard
    nxt = first.copy()                            # next receive edge of each shard
    broken = 0
    while True:
        progressed, pending = False, False
        for k in range(len(starts)):
            if pos[k] >= ends[k]:
                continue
            pending = True
            j = int(nxt[k])
            stop = _first_waiting(pos, recv, send, send_shard, j, int(last[k]))
            end = int(recv[stop]) if stop < last[k] else int(ends[k])
            if end <= pos[k]:
                continue
            seg = t_ns[pos[k]:end].astype(np.int64, copy=True)
            r = recv[j:stop]
            keep = r < end            # a second edge into the receive we stop at waits with it
            if keep.any():
                np.maximum.at(seg, r[keep] - pos[k], keys[send[j:stop][keep]] + 1)
            if pos[k] > starts[k]:
                seg[0] = max(seg[0], keys[pos[k] - 1])
            keys[pos[k]:end] = np.maximum.accumulate(seg)
            nxt[k] = stop
            pos[k] = end
            progressed = True
        if not pending:
            return keys, broken
        if not progressed:
            # every shard waits on a send that waits on it: drop the earliest edge
            waiting = [k for k in range(len(starts)) if nxt[k] < last[k] and pos[k] < ends[k]]
            k = min(waiting, key=lambda k: t_ns[pos[k]])
            nxt[k] += 1
            broken += 1


def _first_waiting(pos: np.ndarray, recv: np.ndarray, send: np.ndarray, send_shard: np.ndarray,
                   j: int, last: int) -> int:
    """The first edge in [j, last) whose send has no key yet (``last`` if none): a send
    is keyed once its shard's next unkeyed row is past it. Windows double, so a long run
    of ready edges costs O(its length) in a few numpy calls."""
    w = 64
    while j < last:
        hi = min(last, j + w)
        ready = pos[send_shard[j:hi]] > send[j:hi]
        if not ready.all():
            return j + int(np.argmin(ready))
        j, w = hi, w * 2
    return last


def _stamp_of(index_dir: str) -> dict:
    try:
        with open(os.path.join(index_dir, "stamp.json")) as f:
            base = json.load(f)
    except (OSError, ValueError):
        base = None
    return {"timeline_version": VERSION, "base": base}


def is_current(index_dir: str) -> bool:
    """Whether the timeline file of this index exists and matches it."""
    try:
        with open(os.path.join(index_dir, STAMP)) as f:
            return json.load(f) == _stamp_of(index_dir) and os.path.exists(os.path.join(index_dir, FILE))
    except (OSError, ValueError):
        return False


def ensure(model) -> str:
    """Build (or reuse) the timeline of a TraceModel; returns the file's path."""
    d = model.index_dir
    path = os.path.join(d, FILE)
    if not is_current(d):
        build(model, path)
        with open(os.path.join(d, STAMP), "w") as f:
            json.dump(_stamp_of(d), f)
    return path


def build(model, path: str) -> None:
    """Compute the order and write the timeline: a merge of the shards when the index
    keeps each shard in seq order (it does), else a DuckDB sort."""
    con = model.con
    from .index import table_paths
    events_path = table_paths(model.trace, model.index_dir, "events")
    # file order: seq and t_ns of each shard's file; the shard is the file's (no string
    # column read and encoded again)
    names = [s.name for s in model.trace.shards]
    seq, t, shard_of, in_file_order = _read_seq_t(events_path)
    if not in_file_order:
        ev = con.sql(query_sql("events_in_order")).to_arrow_table()
        shard_codes = ev.column("shard").combine_chunks().dictionary_encode()
        shard_of = shard_codes.indices.to_numpy(zero_copy_only=False).astype(np.int32)
        seq = _int64(ev.column("seq"))
        t = _int64(ev.column("t_ns").fill_null(0))
        names = shard_codes.dictionary.to_pylist()
        del ev
    model.derive(["sync_pairs"])
    pairs = model.ask("pairs")
    recv_all = _rows_of(names, shard_of, seq, pairs.column("recv_shard"), pairs.column("recv_seq"))
    send_all = _rows_of(names, shard_of, seq, pairs.column("send_shard"), pairs.column("send_seq"))
    recv_at = np.flatnonzero(recv_all >= 0)            # pairs whose receive is in the trace
    recv_rows = recv_all[recv_at]
    edge = (recv_all >= 0) & (send_all >= 0) & (recv_all != send_all)
    bounds = np.stack([recv_all[edge], send_all[edge]], axis=1)
    t1 = time.perf_counter()
    keys, _broken = hb_keys(shard_of, t, bounds)
    TIMES["hb_keys_s"] = time.perf_counter() - t1
    # rows come in (shard, seq) order, so a stable sort by key alone is the order by
    # (key, shard, seq); the shards' keys are sorted runs, which timsort merges in O(n log shards)
    perm = np.argsort(keys, kind="stable")
    del keys, t, bounds, send_all, recv_all     # 8 bytes an event each: the merge, the peak, comes next
    tmp = path + ".tmp"
    t1 = time.perf_counter()
    if in_file_order:
        order = np.argsort(np.asarray(recv_rows, dtype=np.int64), kind="stable")
        take = pa.array(np.asarray(recv_at, dtype=np.int64)[order])
        merge.write_in_order(events_path, tmp, perm, batches=_stream_batches(model, events_path), pairs={
            "rows": np.asarray(recv_rows, dtype=np.int64)[order],
            "shard": pairs.column("send_shard").combine_chunks().take(take),
            "seq": pairs.column("send_seq").combine_chunks().take(take),
            "xfer": pairs.column("send_xfer").combine_chunks().take(take)})
    else:
        ord_ = np.empty(len(perm), dtype=np.int64)
        ord_[perm] = np.arange(len(perm), dtype=np.int64)
        con.register("timeline_ord", pa.table({
            "shard": pa.DictionaryArray.from_arrays(pa.array(shard_of), pa.array(names, pa.string())).cast(pa.string()),
            "seq": seq, "ord": ord_}))
        con.register("timeline_pairs", pairs)
        try:
            con.sql(query_sql("timeline_sorted")).write_parquet(tmp, compression="zstd",
                                                                 row_group_size=merge.ROWS_PER_GROUP)
        finally:
            con.unregister("timeline_ord")
            con.unregister("timeline_pairs")
    os.replace(tmp, path)
    TIMES["sort_write_s"] = time.perf_counter() - t1


def _stream_batches(model, events_path: list[str]):
    """The index's event rows read from the trace's stream files (index.py wrote them
    from those, in the same order), when the model still holds the streams and each
    holds exactly its index file's rows; None to decode the index instead."""
    from .index import raw_batches
    shards = model.trace.shards
    try:
        same = all(s.streams["events"].num_rows == pq.ParquetFile(p).metadata.num_rows
                   for s, p in zip(shards, events_path))
    except (OSError, KeyError):
        return None
    if not same or len(shards) != len(events_path) or not all(s.streams["events"].num_rows for s in shards):
        return None
    return [raw_batches(s, "events") for s in shards]


def _read_seq_t(paths: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """seq, t_ns (nulls as 0) and the file's number of every row of the files, in file
    order, and whether each file's seq strictly increases (merge.grouped of them: the
    rows of a file are one contiguous run); copied chunk by chunk into arrays sized up
    front (peak: the arrays and one chunk per file, not the Arrow tables beside them).
    The files are read in parallel (Parquet decoding runs outside the GIL)."""
    counts = [pq.ParquetFile(p).metadata.num_rows for p in paths]
    starts = np.cumsum([0] + counts)
    n = int(starts[-1])
    seq, t = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)

    def read(k: int) -> bool:
        at, increasing, last = int(starts[k]), True, None
        for b in pq.ParquetFile(paths[k]).iter_batches(batch_size=1 << 20, columns=["seq", "t_ns"],
                                                        use_threads=False):
            m = b.num_rows
            s = seq[at:at + m]
            s[:] = b.column(0).to_numpy(zero_copy_only=False)
            t[at:at + m] = b.column(1).fill_null(0).to_numpy(zero_copy_only=False)
            if m:
                increasing = increasing and bool(np.all(s[1:] > s[:-1])) and (last is None or s[0] > last)
                last = s[-1]
            at += m
        return increasing

    if len(paths) > 1:
        with ThreadPoolExecutor(READERS) as ex:
            increasing = list(ex.map(read, range(len(paths))))
    else:
        increasing = [read(k) for k in range(len(paths))]
    shard_of = np.repeat(np.arange(len(paths), dtype=np.int32), counts)
    return seq, t, shard_of, all(increasing)


def _int64(col) -> np.ndarray:
    """A non-null int64 column as one numpy array."""
    if len(col) == 0:
        return np.array([], dtype=np.int64)
    return col.combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _rows_of(names: list[str], shard_of: np.ndarray, seq: np.ndarray, shard_col, seq_col) -> np.ndarray:
    """The row of each (shard, seq) among events in (shard, seq) order, -1 where the
    trace holds no such event (vectorized: one binary search per shard)."""
    n = len(seq_col)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    codes = pa.chunked_array(shard_col).combine_chunks().dictionary_encode()
    code_of = {name: i for i, name in enumerate(names)}
    # the pairs' shard codes mapped to the events' (-1: a shard not in the trace)
    remap = np.array([code_of.get(v, -1) for v in codes.dictionary.to_pylist()] or [-1], dtype=np.int64)
    idx = codes.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    which = np.where(codes.indices.is_valid().to_numpy(zero_copy_only=False), remap[idx], -1)
    want = pa.chunked_array(seq_col).combine_chunks().fill_null(np.iinfo(np.int64).min).to_numpy(zero_copy_only=False)
    bounds = np.searchsorted(shard_of, np.arange(len(names) + 1), side="left")
    for k in range(len(names)):
        sel = np.flatnonzero(which == k)
        a, b = int(bounds[k]), int(bounds[k + 1])
        if len(sel) == 0 or a == b:
            continue
        r = a + np.searchsorted(seq[a:b], want[sel])
        ok = r < b
        ok[ok] = seq[r[ok]] == want[sel][ok]
        out[sel[ok]] = r[ok]
    return out
