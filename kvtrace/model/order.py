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

import numpy as np
import pyarrow as pa

from . import merge
from .sqltext import query_sql

VERSION = 3
FILE = "timeline.parquet"
STAMP = "timeline_stamp.json"
#: seconds of the last build's parts (for bench/bench_tui.py)
TIMES: dict[str, float] = {}


def hb_keys(shard_of: np.ndarray, t_ns: np.ndarray, bounds: list[tuple[int, int]]) -> tuple[np.ndarray, int]:
    """Happens-before keys for events given in per-shard program order.

    Args:
        shard_of: shard index of each event; each shard's events contiguous, in seq order.
        t_ns: each event's timestamp.
        bounds: (receive row, send row) pairs: the receive must sort after the send.
    Returns:
        (keys, broken): keys nondecreasing within a shard and key[recv] > key[send];
        ``broken`` counts receive edges dropped because they formed a cycle (a corrupt
        trace), which keeps the order total instead of failing.
    """
    n = len(t_ns)
    keys = np.empty(n, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, shard_of[1:] != shard_of[:-1]]) if n else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], n].astype(np.int64)
    # per shard: its receive rows sorted, with the send row each waits for
    recv_of = {}
    for r, s in sorted(bounds):
        recv_of.setdefault(int(np.searchsorted(starts, r, side="right") - 1), []).append((r, s))
    pos = starts.astype(np.int64).copy()          # next unkeyed row of each shard
    nxt = {k: 0 for k in recv_of}                 # next receive (index into recv_of[k])
    broken = 0
    done_upto = lambda row: pos[np.searchsorted(starts, row, side="right") - 1] > row  # noqa: E731
    while True:
        progressed, pending = False, False
        for k in range(len(starts)):
            if pos[k] >= ends[k]:
                continue
            pending = True
            rl, j = recv_of.get(k, []), nxt.get(k, 0)
            lo_bounds = []
            end = ends[k]
            while j < len(rl):
                r, s = rl[j]
                if not done_upto(s):
                    end = r           # stop before a receive whose send has no key yet
                    break
                lo_bounds.append((r, keys[s] + 1))
                j += 1
            if end <= pos[k]:
                continue
            seg = t_ns[pos[k]:end].copy()
            for r, lo in lo_bounds:
                if r < end:
                    seg[r - pos[k]] = max(seg[r - pos[k]], lo)
            if pos[k] > starts[k]:
                seg[0] = max(seg[0], keys[pos[k] - 1])
            keys[pos[k]:end] = np.maximum.accumulate(seg)
            nxt[k] = j
            pos[k] = end
            progressed = True
        if not pending:
            return keys, broken
        if not progressed:
            # every shard waits on a send that waits on it: drop the earliest edge
            k = min((k for k in recv_of if nxt[k] < len(recv_of[k]) and pos[k] < ends[k]),
                    key=lambda k: t_ns[pos[k]])
            recv_of[k].pop(nxt[k])
            broken += 1


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
    from .index import read_table, table_paths
    events_path = table_paths(model.trace, model.index_dir, "events")
    ev = read_table(model.trace, model.index_dir, "events", ["shard", "seq", "t_ns"])   # file order
    in_file_order = merge.grouped(ev.column("shard").combine_chunks().dictionary_encode().indices.to_numpy(),
                                  ev.column("seq").to_numpy())
    if not in_file_order:
        ev = con.sql(query_sql("events_in_order")).to_arrow_table()
    shard_codes = ev.column("shard").combine_chunks().dictionary_encode()
    shard_of = shard_codes.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    seq = ev.column("seq").to_numpy()
    t = ev.column("t_ns").fill_null(0).to_numpy() if ev.num_rows else np.array([], dtype=np.int64)
    names = shard_codes.dictionary.to_pylist()
    del ev
    model.derive(["sync_pairs"])
    pairs = model.ask("pairs")
    bounds, recv_rows, recv_at = [], [], []
    if pairs.num_rows:
        row_of = _row_finder(names, shard_of, seq)
        for i, (rs, rq, ss, sq) in enumerate(zip(*(pairs.column(c).to_pylist()
                                                   for c in ("recv_shard", "recv_seq", "send_shard", "send_seq")))):
            r, s = row_of(rs, rq), row_of(ss, sq)
            if r is not None:
                recv_rows.append(r)
                recv_at.append(i)
            if r is not None and s is not None and r != s:
                bounds.append((r, s))
    t1 = time.perf_counter()
    keys, _broken = hb_keys(shard_of, t, bounds)
    TIMES["hb_keys_s"] = time.perf_counter() - t1
    perm = np.lexsort((seq, shard_of, keys))
    tmp = path + ".tmp"
    t1 = time.perf_counter()
    if in_file_order:
        order = np.argsort(np.asarray(recv_rows, dtype=np.int64), kind="stable")
        take = pa.array(np.asarray(recv_at, dtype=np.int64)[order])
        merge.write_in_order(events_path, tmp, perm, {
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


def _row_finder(names, shard_of, seq):
    starts = {}
    for i, name in enumerate(names):
        idx = np.flatnonzero(shard_of == i)
        if len(idx):
            starts[name] = (int(idx[0]), int(idx[-1]) + 1)

    def row_of(shard, s):
        if shard not in starts:
            return None
        a, b = starts[shard]
        r = a + int(np.searchsorted(seq[a:b], s))
        return r if r < b and seq[r] == s else None
    return row_of
