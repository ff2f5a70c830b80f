"""The timeline's happens-before-consistent total order, built once under ``_index/``.

Every event gets a key ``T``: its own timestamp, raised to at least the key of the
event before it in its shard, and to one more than the key of the send a receive
pairs with (a Lamport clock weighted by real time). Sorting by ``(T, shard, seq)``
keeps program order and puts every receive after its send, whatever the shard clocks
say; among concurrent events the timestamps decide, which reads naturally.

Files (next to the analysis index, rebuilt when its ``stamp.json`` changes):
``tui_events.parquet`` (events sorted by ``ord``), ``tui_slots.parquet`` (slot
ownership history), ``tui_xfers.parquet`` (each transfer's events), ``tui_stamp.json``.
"""
from __future__ import annotations

import json
import os
import time
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute.if_else in merge)
import pyarrow.parquet as pq

from . import merge

TUI_VERSION = 2
BUILD_MEMORY = "1GB"      # DuckDB's cap while sorting the events by ord (it spills past it)
FILES = ("tui_events.parquet", "tui_slots.parquet", "tui_xfers.parquet")
#: seconds of the last build's parts (for bench/bench_tui.py)
TIMES: dict[str, float] = {}


def sql_text(name: str) -> str:
    """The text of ``tui/sql/<name>.sql``."""
    return resources.files("kvtrace.tui").joinpath("sql", name + ".sql").read_text()


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
    return {"tui_version": TUI_VERSION, "base": base}


def ensure_order(session) -> dict:
    """Build (or reuse) the timeline index of a TraceSession; returns its file paths."""
    d = session.index_dir
    paths = {f.split(".")[0]: os.path.join(d, f) for f in FILES}
    stamp, stamp_path = _stamp_of(d), os.path.join(d, "tui_stamp.json")
    try:
        with open(stamp_path) as f:
            if json.load(f) == stamp and all(os.path.exists(p) for p in paths.values()):
                return paths
    except (OSError, ValueError):
        pass
    build_order(session, paths)
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return paths


def build_order(session, paths: dict) -> None:
    """Compute the order and write tui_events / tui_slots / tui_xfers: a merge of the
    shards when the analysis index keeps each shard in seq order (it does), else a
    DuckDB sort."""
    con = session.con
    # the sort below would otherwise take most of the machine's memory: let DuckDB spill
    spill = os.path.join(session.index_dir, "_tui_spill").replace("'", "''")
    con.execute(f"SET memory_limit='{BUILD_MEMORY}'")
    try:
        con.execute(f"SET temp_directory='{spill}'")
    except Exception:  # noqa: BLE001 — DuckDB refuses once it has spilled elsewhere; keep that one
        pass
    try:
        _build(con, paths, os.path.join(session.index_dir, "events.parquet"))
    finally:
        con.execute("RESET memory_limit")


def _build(con, paths: dict, events_path: str) -> None:
    ev = pq.read_table(events_path, columns=["shard", "seq", "t_ns"])   # file order
    in_file_order = merge.grouped(ev.column("shard").combine_chunks().dictionary_encode().indices.to_numpy(),
                                  ev.column("seq").to_numpy())
    if not in_file_order:
        ev = con.sql("SELECT shard, seq, t_ns FROM events ORDER BY shard, seq").to_arrow_table()
    shard_codes = ev.column("shard").combine_chunks().dictionary_encode()
    shard_of = shard_codes.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    seq = ev.column("seq").to_numpy()
    t = ev.column("t_ns").fill_null(0).to_numpy() if ev.num_rows else np.array([], dtype=np.int64)
    names = shard_codes.dictionary.to_pylist()
    del ev
    pairs = con.sql(sql_text("pairs")).to_arrow_table()
    bounds, recv_rows, recv_at = [], [], []
    if pairs.num_rows:
        row_of = _row_finder(names, shard_of, seq)
        for i, (rs, rq, ss, sq) in enumerate(zip(*(pairs.column(c).to_pylist()
                                                   for c in ("shard", "seq", "send_shard", "send_seq")))):
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
    if in_file_order:
        t1 = time.perf_counter()
        order = np.argsort(np.asarray(recv_rows, dtype=np.int64), kind="stable")
        take = pa.array(np.asarray(recv_at, dtype=np.int64)[order])
        tmp = paths["tui_events"] + ".tmp"
        merge.write_in_order(events_path, tmp, perm, {
            "rows": np.asarray(recv_rows, dtype=np.int64)[order], "shard": pairs.column("send_shard").combine_chunks().take(take),
            "seq": pairs.column("send_seq").combine_chunks().take(take),
            "xfer": pairs.column("send_xfer").combine_chunks().take(take)})
        os.replace(tmp, paths["tui_events"])
        TIMES["sort_write_s"] = time.perf_counter() - t1
        del perm, keys, t
        _build_side_tables(con, paths)
        return
    ord_ = np.empty(len(perm), dtype=np.int64)
    ord_[perm] = np.arange(len(perm), dtype=np.int64)
    tui_ord = pa.table({"shard": pa.DictionaryArray.from_arrays(pa.array(shard_of), pa.array(names, pa.string())).cast(pa.string()),
                        "seq": seq, "ord": ord_})
    del keys, perm, t
    tui_pairs = pairs  # noqa: F841 (DuckDB finds both tables by variable name)
    tmp = paths["tui_events"] + ".tmp"
    t1 = time.perf_counter()
    con.execute(sql_text("build_events").format(out=_q(tmp)))
    os.replace(tmp, paths["tui_events"])
    TIMES["sort_write_s"] = time.perf_counter() - t1
    del tui_ord
    _build_side_tables(con, paths)


def _build_side_tables(con, paths: dict) -> None:
    tmp = paths["tui_slots"] + ".tmp"
    con.execute(sql_text("build_slots").format(events=_q(paths["tui_events"]), out=_q(tmp)))
    os.replace(tmp, paths["tui_slots"])
    tmp = paths["tui_xfers"] + ".tmp"
    con.execute(sql_text("build_xfers").format(events=_q(paths["tui_events"]), out=_q(tmp)))
    os.replace(tmp, paths["tui_xfers"])


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


def _q(path: str) -> str:
    return path.replace("'", "''")
