"""The timeline's happens-before order (kvtrace/model/order.py) as the TUI pages it."""
import numpy as np

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


def test_grouped_detects_interleaved_shards():
    from kvtrace.model.merge import grouped
    assert grouped(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
    assert not grouped(np.array([0, 1, 0]), np.array([0, 0, 1]))
    assert not grouped(np.array([0, 0]), np.array([1, 0]))


def test_read_seq_t_says_whether_each_file_keeps_seq_order(tmp_path):
    """order._read_seq_t's flag is merge.grouped of the rows it reads (files read apart)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kvtrace.model import merge, order

    for seqs, want in (([[0, 1, 5], [2, 3]], True), ([[0, 1, 1], [2, 3]], False), ([[0, 2], [4, 3]], False)):
        paths = []
        for k, s in enumerate(seqs):
            paths.append(str(tmp_path / f"{k}.parquet"))
            pq.write_table(pa.table({"seq": pa.array(s, pa.int64()), "t_ns": pa.array([None] * len(s), pa.int64())}),
                           paths[-1], row_group_size=2)
        seq, t, shard_of, flag = order._read_seq_t(paths)
        assert flag is want and merge.grouped(shard_of, seq) is want
        assert list(seq) == sum(seqs, []) and not t.any()
