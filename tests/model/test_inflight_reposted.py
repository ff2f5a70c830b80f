"""A transfer id posted twice in one shard (an untrusted trace: NIXL never reuses one, and
the format gives every posting its own id) leaves which descriptor rows and completions
belong to which posting unknown, so the analysis ends the shard before that id's first
post (cut.repeated_xfer_posts). What is left derives: inflight_pairs names each pair's
requests by its posting (initiator shard, transfer id, post seq), each pair's request is
the one end_hold gives that posting's ends, and no id is posted twice in what is analysed;
the unmodified trace (the clean twin) is not cut and gives the same kind of rows."""
from __future__ import annotations

import glob
import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

from kvtrace.model import TraceModel

TRACE = "traces/engine-early-src-free.kvtrace"
REPOSTED = 20


def repost_first_transfers(path: str) -> int:
    """Append, after every event of the shard that posts, a second post of its first
    REPOSTED transfer ids (same rows, new seqs and times), and their descriptor rows again,
    as a re-post writes them (docs/format.md: without them the second posts' rows are
    missing, and the analysis cuts the shard there). Returns how many were added."""
    added = 0
    for p in glob.glob(os.path.join(path, "*", "events.arrows")):
        with pa.OSFile(p) as f:
            t = pa.ipc.open_stream(f).read_all()
        posts = t.filter(pc.equal(t["kind"], "xfer_post")).slice(0, REPOSTED)
        if not posts.num_rows:
            continue
        seq0, t0 = pc.max(t["seq"]).as_py() + 1, pc.max(t["t_ns"]).as_py() + 1
        cols = {n: posts[n] for n in posts.column_names}
        cols["seq"] = pa.array(range(seq0, seq0 + posts.num_rows), pa.int64())
        cols["t_ns"] = pa.array(range(t0, t0 + posts.num_rows), pa.int64())
        out = pa.concat_tables([t, pa.table(cols).cast(t.schema)])
        with pa.OSFile(p, "wb") as f, pa.ipc.new_stream(f, out.schema) as w:
            w.write_table(out)
        dp = os.path.join(os.path.dirname(p), "descs.arrows")
        with pa.OSFile(dp) as f:
            ds = pa.ipc.open_stream(f).read_all()
        again = ds.filter(pc.is_in(ds["xfer"], value_set=posts["xfer"].combine_chunks()))
        with pa.OSFile(dp, "wb") as f, pa.ipc.new_stream(f, ds.schema) as w:
            w.write_table(pa.concat_tables([ds, again]))
        added += posts.num_rows
    return added


def pairs_and_their_requests(path: str):
    """inflight_pairs' rows, and the same pairs with end_hold's request of each side's posting."""
    with TraceModel(path, keep_derived=False) as m:
        m.derive(["inflight_pairs", "end_hold"])
        pairs = m.execute("SELECT a_shard, a_xfer, a_post, a_request, b_shard, b_xfer, b_post, b_request "
                          "FROM inflight_pairs ORDER BY ALL").fetchall()
        named = m.execute("""
            SELECT p.a_shard, p.a_xfer, p.a_post, a.request, p.b_shard, p.b_xfer, p.b_post, b.request
            FROM inflight_pairs p
            JOIN (SELECT DISTINCT shard, xfer, post_seq, request FROM end_hold) a
              ON a.shard = p.a_shard AND a.xfer = p.a_xfer AND a.post_seq = p.a_post
            JOIN (SELECT DISTINCT shard, xfer, post_seq, request FROM end_hold) b
              ON b.shard = p.b_shard AND b.xfer = p.b_xfer AND b.post_seq = p.b_post
            ORDER BY ALL""").fetchall()
    return pairs, named


def test_reposted_transfer_ids_cut_before_the_first_posting_of_the_id(tmp_path):
    path = str(tmp_path / "reposted.kvtrace")
    shutil.copytree(TRACE, path)
    assert repost_first_transfers(path) == REPOSTED
    pairs, named = pairs_and_their_requests(path)
    assert pairs == named
    with TraceModel(path, keep_derived=False) as m:
        m.derive(["xfers"])
        twice = m.execute("SELECT count(*) FROM (SELECT shard, xfer FROM xfers GROUP BY ALL HAVING count(*) > 1)").fetchone()[0]
        first = dict(m.execute("SELECT shard, min(seq) FROM recorded_events WHERE kind = 'xfer_post' "
                               "GROUP BY shard").fetchall())
        cuts = {n: (c.cut, c.kinds) for n, c in m.cuts.items() if c.cut is not None}
    assert twice == 0                              # what is analysed posts each id once
    # each shard that posts is cut before its first post (the re-posted ids are its first);
    # a shard that received what it sent after that is cut by the closure
    assert set(first) <= set(cuts)
    assert all(cuts[n][0] == first[n] - 1 and "repeated_xfers" in cuts[n][1] for n in first)


def test_clean_twin_pairs_named_the_same_way(tmp_path):
    path = str(tmp_path / "plain.kvtrace")
    shutil.copytree(TRACE, path)
    pairs, named = pairs_and_their_requests(path)
    assert pairs and pairs == named
    with TraceModel(path, keep_derived=False) as m:
        assert not m.cuts
