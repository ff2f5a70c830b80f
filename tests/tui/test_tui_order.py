"""The timeline's happens-before order (kvtrace/model/order.py) as the TUI pages it."""
import pathlib

import numpy as np
import pyarrow.parquet as pq

from kvtrace.analysis.session import TraceSession
from kvtrace.model.order import hb_keys
from kvtrace.tui.source import TimelineSource


def test_receive_sorts_after_its_send_despite_a_skewed_clock():
    # shard 0: rows 0,1,2 (row 1 posts at t=50); shard 1: rows 3,4 whose clock runs 1000 behind:
    # row 4 receives row 1's notification at t=-900, which timestamps alone would put first
    shard = np.array([0, 0, 0, 1, 1])
    t = np.array([10, 50, 60, -950, -900])
    keys, broken = hb_keys(shard, t, [(4, 1)])
    assert broken == 0
    assert keys[4] > keys[1]
    assert list(keys[:3]) == sorted(keys[:3]) and keys[3] <= keys[4]


def test_timestamps_order_concurrent_events_when_no_edge_binds():
    keys, _ = hb_keys(np.array([0, 0, 1, 1]), np.array([1, 30, 10, 20]), [])
    assert list(np.lexsort((np.zeros(4), np.array([0, 0, 1, 1]), keys))) == [0, 2, 3, 1]


def test_a_cycle_of_edges_is_broken_not_hung():
    # each shard's first event receives the other's second: impossible, so one edge goes
    keys, broken = hb_keys(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), [(0, 3), (2, 1)])
    assert broken == 1 and len(keys) == 4


def test_index_puts_notification_after_post_and_keeps_program_order(early_free_trace):
    src = TimelineSource(TraceSession(early_free_trace))
    rows = [src.row(i) for i in range(src.count)]
    assert [r["ord"] for r in rows] == list(range(src.total))
    pos = {(r["shard"], r["seq"]): r["ord"] for r in rows}
    for shard in ("prefill", "decode"):
        seqs = [r["seq"] for r in rows if r["shard"] == shard]
        assert seqs == sorted(seqs)
    recv = next(r for r in rows if r["kind"] == "notif_recv")
    assert (recv["pair_shard"], recv["pair_xfer"]) == ("prefill", 0)
    assert pos[("prefill", recv["pair_seq"])] < recv["ord"]
    mrecv = next(r for r in rows if r["kind"] == "msg_recv")
    msend = next(r for r in rows if r["kind"] == "msg_send")
    assert msend["ord"] < mrecv["ord"] and mrecv["pair_shard"] == "decode"


def test_merge_writer_matches_the_sort_path(early_free_trace, tmp_path, monkeypatch):
    """The shard merge (merge.py; from the stream files, and from the index when the
    model released them) and the DuckDB sort fallback write the same timeline."""
    import shutil

    import duckdb

    from kvtrace.model import merge, order

    shutil.copytree(early_free_trace, tmp_path / "t", ignore=shutil.ignore_patterns("_index"))
    s = TraceSession(str(tmp_path / "t"))
    path = order.ensure(s)
    q = "SELECT * FROM read_parquet(?) ORDER BY ALL"
    merged = duckdb.execute(q, [path]).fetchall()
    s.release_streams()      # the merge reads the index's Parquet instead of the stream files
    order.build(s, path)
    assert duckdb.execute(q, [path]).fetchall() == merged
    read = order._read_seq_t       # rows said not to be in (shard, seq) order: the sort path
    monkeypatch.setattr(order, "_read_seq_t", lambda paths: (*read(paths)[:3], False))
    order.build(s, path)
    assert duckdb.execute(q, [path]).fetchall() == merged
    assert any(r[-3] is not None for r in merged)     # pairing columns carried


def test_merge_in_parts_writes_the_one_writers_bytes(early_free_trace, tmp_path, monkeypatch):
    """The timeline encoded in runs at once (merge.PARTS) and joined (pqconcat) is the
    file one writer writes, byte for byte, from the stream files and from the index."""
    import shutil

    from kvtrace.model import merge, order

    shutil.copytree(early_free_trace, tmp_path / "t", ignore=shutil.ignore_patterns("_index"))
    s = TraceSession(str(tmp_path / "t"))
    monkeypatch.setattr(merge, "ROWS_PER_GROUP", 2)      # several row groups and blocks at this size
    monkeypatch.setattr(merge, "BLOCK", 4)
    path = str(tmp_path / "tl.parquet")
    seen = {}
    for released in (False, True):
        if released:
            s.release_streams()
        for parts in (1, 2, 3):
            monkeypatch.setattr(merge, "PARTS", parts)
            order.build(s, path)
            seen[released, parts] = open(path, "rb").read()
    assert len(set(seen.values())) == 1
    assert pq.ParquetFile(path).metadata.num_row_groups > 3


def test_grouped_detects_interleaved_shards():
    from kvtrace.model.merge import grouped
    assert grouped(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
    assert not grouped(np.array([0, 1, 0]), np.array([0, 0, 1]))
    assert not grouped(np.array([0, 0]), np.array([1, 0]))


def test_index_tables_written_in_two_runs_are_the_one_writers_bytes(early_free_trace, tmp_path, monkeypatch):
    """The first open's index (kvtrace/model/index.py) writes a big table as two runs of
    row groups at once, joined: the same files as one writer per table."""
    import shutil

    from kvtrace.model import index

    monkeypatch.setattr(index, "ROWS_PER_GROUP", 2)     # several row groups at this size
    files = {}
    for split in (10**9, 2):
        monkeypatch.setattr(index, "SPLIT_GROUPS", split)
        d = tmp_path / f"t{split}"
        shutil.copytree(early_free_trace, d, ignore=shutil.ignore_patterns("_index"))
        _trace, idx = index.ensure_index(str(d))
        files[split] = {p.relative_to(idx): p.read_bytes() for p in sorted(pathlib.Path(idx).glob("*/*.parquet"))}
    assert files[2] == files[10**9] and len(files[2]) > 4
    assert any(pq.ParquetFile(tmp_path / "t2" / "_index" / name).metadata.num_row_groups >= 4 for name in files[2])
    assert not list((tmp_path / "t2" / "_index").glob("*/*.tmp*"))
