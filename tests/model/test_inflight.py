"""inflight_pairs (numpy sweep, kvtrace/model/inflight.py) gives exactly the pairs of the
reference SQL rule (inflight_pairs_reference.sql: a row_number window and a self-join) on
random descriptor ends with dense address collisions, ties in every sort key and nulls.
The reference reads the ends by name (end_hold); the sweep reads them as the model stores
them (end_hold_ids' integer ids, id_names, the transfers' requests in xfers), derived
here from the same ends as the model derives end_hold."""
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest

from kvtrace.model import inflight
from kvtrace.model.sqltext import query_sql

HERE = os.path.dirname(__file__)
SHARDS = ["decode", "prefill", "p2"]   # not in name order: the sweep orders by name, not by index


def random_tables(seed: int, n: int):
    """Ends as a trace has them: (transfer, pos, side) unique, one post per transfer; the
    sort keys collide (addresses, timestamps) and some values are null."""
    r = np.random.default_rng(seed)
    nx = max(2, n // 6)
    xs = r.integers(0, len(SHARDS), nx)            # transfer -> initiator shard
    # sparse ids (a binary-searched lookup) or dense ones (a direct table) by seed
    xid = r.integers(0, 5, nx) * 7 + np.arange(nx) * 1000 if seed % 2 else np.arange(nx) * 3 + 11
    post = r.permutation(4 * nx)[:nx]              # one post seq per transfer
    req = r.integers(0, 9, nx)                     # one request per transfer (xfers.request)
    x = np.sort(r.integers(0, nx, n // 2))         # descriptor -> transfer
    pos = np.arange(len(x)) - np.searchsorted(x, x)
    x, pos = np.repeat(x, 2), np.repeat(pos, 2)
    side = np.tile(np.array(["src", "dst"], dtype=object), len(x) // 2)
    n = len(x)
    null = lambda p: r.random(n) < p               # noqa: E731
    agents = np.array(["a", "b", "ab", None], dtype=object)
    end_hold = pa.table({
        "agent": pa.array(agents[r.choice(4, n, p=[.45, .45, .05, .05])], pa.string()),
        "shard": pa.array(np.array(SHARDS, dtype=object)[xs[x]], pa.string()),
        "xfer": pa.array(xid[x], pa.int64()),
        "pos": pa.array(pos, pa.int32()),
        "side": pa.array(side, pa.string()),
        "request": pa.array([f"r{v}" for v in req[x]], pa.string()),
        "post_seq": pa.array(post[x], pa.int64()),
        "psidx": pa.array(xs[x], pa.int32()),
        "pool": pa.array(["kv"] * n, pa.string()),
        "layer": pa.array(r.integers(0, 3, n), pa.int32()),
        "slot": pa.array(r.integers(0, 5, n), pa.int64()),
        # few addresses (collisions), some across a 64 KiB bucket boundary
        "addr": pa.array((65536 - 256 + r.integers(0, 8, n) * 128).astype(np.uint64), pa.uint64(), mask=null(.02)),
        "nbytes": pa.array(r.choice([64, 128, 256, 512], n).astype(np.uint64), pa.uint64(), mask=null(.03)),
        "t_ns": pa.array(r.integers(0, 6, n), pa.int64(), mask=null(.05)),
    })
    m = nx * len(SHARDS)
    seen = pa.table({
        "shard": pa.array(np.array(SHARDS, dtype=object)[np.repeat(xs, len(SHARDS))], pa.string()),
        "xfer": pa.array(np.repeat(xid, len(SHARDS)), pa.int64()),
        "side_sidx": pa.array(np.tile(np.arange(len(SHARDS)), nx), pa.int32()),
        "end_seq": pa.array(r.integers(0, 60, m), pa.int64(), mask=r.random(m) < .2),
    })
    keep = r.random(m) < .8                          # not every transfer is known everywhere
    return end_hold, seen.filter(pa.array(keep))


@pytest.mark.parametrize("seed", range(12))
def test_numpy_sweep_matches_the_sql_rule(seed, tmp_path):
    end_hold, seen = random_tables(seed, 80 + 80 * seed)
    if seed % 3 == 2:   # addresses over several agents' buckets: ranges swept one at a time
        blocks = np.random.default_rng(seed).integers(0, 4, end_hold.num_rows).astype(np.uint64) << np.uint64(24)
        addr = pa.compute.add(end_hold.column("addr"), pa.array(blocks, pa.uint64()))
        end_hold = end_hold.set_column(end_hold.schema.get_field_index("addr"), "addr", addr)
    assert_matches_reference(end_hold, seen, tmp_path, seed)


def _replace(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


@pytest.mark.parametrize("seed", range(6))
def test_sweep_of_extreme_keys_in_small_blocks(seed, tmp_path, monkeypatch):
    """The packed sort (kvtrace/model/sortkey.py) with keys too wide for one word: addresses
    over the whole 64-bit range, t_ns from int64's least to its largest, and ties in the
    first word (so ordered by the others); the sweep's blocks and the matrix's batches a few
    rows each (neighbours across a block's edge); a post at int64's largest seq, or an end
    seq at its least beside null posts, where the dense table's sentinels would meet real
    values (over_by() instead of later_than())."""
    monkeypatch.setattr(inflight, "BLOCK", 5)
    monkeypatch.setattr(inflight, "FILL_ROWS", 7)
    end_hold, seen = random_tables(seed, 400)
    r = np.random.default_rng(seed)
    high = r.integers(0, 4, end_hold.num_rows).astype(np.uint64) << np.uint64(62)   # whole buckets: up to 2**64 - 2**62
    end_hold = _replace(end_hold, "addr", pa.compute.add(end_hold.column("addr"), pa.array(high, pa.uint64())))
    wide = np.array([-2**63, -5, 0, 7, 2**62, 2**63 - 1], np.int64)   # t_ns 0..5 keep their order and ties
    t = end_hold.column("t_ns").combine_chunks()
    nulls = t.is_null().to_numpy(zero_copy_only=False)
    end_hold = _replace(end_hold, "t_ns", pa.array(wide[t.fill_null(0).to_numpy()], pa.int64(), mask=nulls))
    if seed % 3 == 1:   # one transfer posted at int64's largest seq
        post = end_hold.column("post_seq").to_numpy()
        end_hold = _replace(end_hold, "post_seq", pa.array(np.where(post == post.max(), 2**63 - 1, post), pa.int64()))
    if seed % 3 == 2:   # null posts beside an end seq at int64's least
        post = end_hold.column("post_seq").to_numpy()
        end_hold = _replace(end_hold, "post_seq", pa.array(post, pa.int64(), mask=post % 5 == 0))
        # ends of two transfers now tie on every sort key (their order, so their pairs, is
        # any): one of each such group is kept
        end_hold = duckdb.sql("SELECT * EXCLUDE (k) FROM (SELECT *, row_number() OVER (PARTITION BY agent, addr, "
                              "t_ns, shard, post_seq, pos, side) AS k FROM end_hold) WHERE k = 1").to_arrow_table()
        ends = seen.column("end_seq").combine_chunks()
        least = np.where(np.arange(len(ends)) % 7 == 0, -2**63, ends.fill_null(0).to_numpy())
        seen = _replace(seen, "end_seq", pa.array(least, pa.int64(), mask=ends.is_null().to_numpy(zero_copy_only=False)))
    assert_matches_reference(end_hold, seen, tmp_path, seed, requests=seed % 3 != 2)


def assert_matches_reference(end_hold: pa.Table, seen: pa.Table, tmp_path, seed: int, requests: bool = True) -> None:
    """inflight.build's rows are the reference's (but for the requests unless ``requests``:
    xfers here cannot name a null post's)."""
    con = duckdb.connect()
    con.register("end_hold_in", end_hold)
    con.register("xfer_seen_in", seen)
    con.execute("CREATE TABLE end_hold AS SELECT * FROM end_hold_in")
    con.execute("CREATE TABLE xfer_seen AS SELECT * FROM xfer_seen_in")
    # the model's narrow form of these ends: agents and pools by 1-based id in name order,
    # shards by their index in SHARDS (psidx), the side as dst, the request per transfer
    con.execute("CREATE TABLE id_names AS SELECT ?::VARCHAR[] AS shards, "
                "(SELECT list(DISTINCT agent ORDER BY agent) FROM end_hold WHERE agent IS NOT NULL) AS agents, "
                "(SELECT list(DISTINCT pool ORDER BY pool) FROM end_hold WHERE pool IS NOT NULL) AS pools, "
                "[]::VARCHAR[] AS parts", [SHARDS])
    con.execute("""CREATE TABLE end_hold_ids AS
        SELECT e.xfer, e.pos, e.side = 'dst' AS dst, list_position(n.agents, e.agent)::INTEGER AS aid, e.addr,
               e.nbytes, list_position(n.pools, e.pool)::INTEGER AS pid, e.layer, e.slot, e.request, e.post_seq,
               e.psidx, e.t_ns
        FROM end_hold e, id_names n""")
    con.execute("CREATE TABLE xfers AS SELECT DISTINCT psidx AS sidx, xfer, post_seq, request FROM end_hold")
    assert con.execute("SELECT count(*) FROM (SELECT DISTINCT sidx, xfer FROM xfers)").fetchall() == \
        con.execute("SELECT count(*) FROM xfers").fetchall()
    with open(os.path.join(HERE, "inflight_pairs_reference.sql")) as f:
        con.execute(f.read())
    ask = lambda name, params=None: con.sql(query_sql(name), params=params).to_arrow_table()  # noqa: E731
    ref_n = con.execute("SELECT count(*) FROM inflight_pairs_ref").fetchall()[0][0]
    assert ref_n > 0 or seed == 0          # the data do produce pairs
    # one sweep with a dense lookup; ranges of at most 30 ends (several per agent), sorted lookup
    # and the ranges' ends read in one scan, in batches of 7 rows, split into files per range
    stream = lambda name: con.sql(query_sql(name)).to_arrow_reader(7)  # noqa: E731
    for limit, direct, kw in ((inflight.CHUNK_ROWS, inflight.DIRECT_MAX, {}), (30, 0, {}),
                              (30, 0, {"stream": stream, "spill_dir": str(tmp_path), "stream_min": 0})):
        got = inflight.build(ask, SHARDS, limit, direct, **kw)
        con.register("got", got)
        assert con.execute("SELECT count(*) FROM got").fetchall()[0][0] == ref_n
        cols = "*" if requests else "* EXCLUDE (a_request, b_request)"
        assert con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM got EXCEPT ALL "
                           f"SELECT {cols} FROM inflight_pairs_ref)").fetchall()[0][0] == 0
        assert [c[1] for c in con.execute("DESCRIBE got").fetchall()] == \
            [c[1] for c in con.execute("DESCRIBE inflight_pairs_ref").fetchall()]
        con.unregister("got")
    assert os.listdir(tmp_path) == []   # the range files are removed


def test_ranges_cut_at_block_boundaries_and_the_limit():
    blocks = pa.table({"agent": ["a", "a", "a", "b", "b"], "block": [0, 1, 5, 0, 1], "n": [10, 10, 50, 5, 5]})
    assert inflight.chunks(blocks, 20) == [("a", 0, 2), ("a", 5, 6), ("b", 0, 2)]
    assert inflight.chunks(blocks, 100) == [("a", 0, 6), ("b", 0, 2)]


class _Unnamed:
    """Names for inflight_pairs without a model: every request null."""
    shards, agents, pools = pa.array(SHARDS), pa.array(["a", "b", "c"]), pa.array(["kv"])

    def requests(self, psidx, xfer, post):
        return pa.nulls(len(xfer), pa.string())


@pytest.mark.parametrize("other", [1 + (1 << 16), 1 - (1 << 16), -1])
def test_agent_codes_past_16_bits_are_compared_whole(other):
    """The sweep keys each end's (agent, bucket) run in 64 bits, 16 of them the agent's
    code; codes past them (or negative) are compared whole: agents 1 and 1 + 2**16 differ."""
    r = np.random.default_rng(3)
    n = 600
    codes = r.integers(1, 3, n)
    ends = pa.table({
        "agent_code": pa.array(codes, pa.int32()), "psidx": pa.array(r.integers(0, 3, n), pa.int32()),
        "xfer": pa.array(np.arange(n) // 2, pa.int64()), "pos": pa.array(np.zeros(n), pa.int32()),
        "side_code": pa.array(np.arange(n) % 2, pa.int32()),
        "addr": pa.array(r.integers(0, 8, n).astype(np.uint64) * np.uint64(64), pa.uint64()),
        "nbytes": pa.array(np.full(n, 1024, np.uint64), pa.uint64()), "t_ns": pa.array(r.integers(0, 50, n), pa.int64()),
        "post_seq": pa.array(np.arange(n) // 2, pa.int64()), "pid": pa.array(np.ones(n), pa.int32()),
        "layer": pa.array(np.zeros(n), pa.int32()), "slot": pa.array(np.zeros(n), pa.int64())})
    seen = inflight.Seen(pa.table({"shard": pa.array([], pa.string()), "xfer": pa.array([], pa.int64()),
                                   "side_sidx": pa.array([], pa.int32()), "end_seq": pa.array([], pa.int64())}), SHARDS)
    want = inflight.inflight_pairs(ends, seen, _Unnamed()).drop_columns(["agent"])
    assert want.num_rows > 0
    # agent 2's code becomes ``other``: its low 16 bits (two's complement's) may be agent 1's
    moved = ends.set_column(0, "agent_code", pa.array(np.where(codes == 2, other, 1), pa.int32()))
    got = inflight.inflight_pairs(moved, seen, _Unnamed()).drop_columns(["agent"])
    assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)
