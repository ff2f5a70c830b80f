"""desc_ends (both ends of a descriptor resolved side by side) gives exactly the ends of the
reference rule (desc_end_reference.sql: the two ends stacked, one range join on the layout
regions), also where an agent's layout regions overlap and an end falls in several: desc_end
gives every (end, region) once, and desc_ends one row per pair of the two ends' regions, as a
join of the reference's two ends on the descriptor would."""
import os

import duckdb
import pyarrow as pa

from kvtrace.model.registry import registry
from tracer.schema import SCHEMAS

HERE = os.path.dirname(__file__)


def _table(name, rows):
    schema = SCHEMAS[name]
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def _con():
    lay = [  # agent a: regions 0-400 (pool p), 200-600 (pool q: overlaps both others), 400-800 (pool p)
        dict(agent="a", pool="p", layer=0, addr=0, nbytes=400, slot_bytes=100, num_slots=4, page_tokens=16),
        dict(agent="a", pool="q", layer=0, addr=200, nbytes=400, slot_bytes=50, num_slots=8, page_tokens=16),
        dict(agent="a", pool="p", layer=1, addr=400, nbytes=400, slot_bytes=100, num_slots=4, page_tokens=16),
        # the same region twice, differing only in page_tokens (two rows of lay)
        dict(agent="b", pool="p", layer=0, addr=1000, nbytes=400, slot_bytes=100, num_slots=4, page_tokens=16),
        dict(agent="b", pool="p", layer=0, addr=1000, nbytes=400, slot_bytes=100, num_slots=4, page_tokens=32),
        dict(agent="c", pool="p", layer=0, part="K", addr=0, nbytes=400, slot_bytes=100, num_slots=4, page_tokens=16),
    ]
    descs, pos = [], 0
    for sa, s in (("a", 50), ("a", 250), ("a", 450), ("a", 590), ("b", 1010), ("c", 120), ("a", 900), (None, 5)):
        for da, d in (("b", 1100), ("a", 300), ("c", 0), ("a", 10), ("x", 5)):
            descs.append(dict(xfer=pos // 4, pos=pos % 4, op="WRITE",
                              src_agent=sa, src_addr=s, dst_agent=da, dst_addr=d, nbytes=20 + pos % 3 * 60,
                              src_dlist=pos if pos % 2 else None, src_idx=pos % 5))
            pos += 1
    con = duckdb.connect()
    con.register("layouts_in", _table("layouts", lay))
    con.register("descs_in", _table("descs", descs))
    con.execute("CREATE TABLE layouts AS SELECT * FROM layouts_in")
    con.execute("CREATE TABLE descs AS SELECT 's' || xfer % 2 AS shard, * FROM descs_in")   # the shard: as the model adds it
    objs = registry()
    for name in ("lay", "desc_ends", "desc_end"):
        con.execute(objs[name].sql)
    with open(os.path.join(HERE, "desc_end_reference.sql")) as f:
        con.execute(f.read())
    return con


def _rows(con, sql):
    return sorted(map(repr, con.execute(sql).fetchall()))


def test_desc_end_is_the_reference_also_where_regions_overlap():
    con = _con()
    ref = _rows(con, "SELECT * FROM desc_end_reference")
    assert _rows(con, "SELECT * FROM desc_end") == ref
    # the overlaps are there: some end falls in two regions
    multi = con.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM desc_end_reference GROUP BY shard, xfer, pos, side)")
    assert multi.fetchall()[0][0] == 2


def test_desc_ends_rows_are_the_pairs_of_the_reference_ends():
    con = _con()
    cols = ("agent, addr, dlist, idx, pool, layer, part, slot, off, slot_bytes, num_slots, crosses, pid, part_id")
    side = lambda p: ", ".join(f"{p}.{c}" for c in cols.split(", "))  # noqa: E731
    ref = _rows(con, f"""SELECT s.shard, s.xfer, s.pos, s.nbytes, {side('s')}, {side('d')}
        FROM desc_end_reference s JOIN desc_end_reference d ON d.shard = s.shard AND d.xfer = s.xfer AND d.pos = s.pos
        WHERE s.side = 'src' AND d.side = 'dst'""")
    assert _rows(con, "SELECT * EXCLUDE (s_first, d_first) FROM desc_ends") == ref
