"""end_hold_ids computes two columns desc_hold_ids does not store (crosses, sk) where a reader
asks for them: they must be what desc_ends resolves (crosses) and the slot's key as slot_ev
makes it (sk) for every end, ends that cross their slot and ends with no layout included."""
from __future__ import annotations

from kvtrace.model import TraceModel
from kvtrace.tracer.builder import TraceBuilder


def _trace(path):
    """One transfer from prefill to decode: a whole slot, one end running past its slot on
    each side (96 bytes from mid-slot), one past its layout region, one outside every layout."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        kv = side.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
        side.register(kv.addr(0, 0), 2 * kv.layer_stride)
    d.req_start("r1")
    d.alloc("r1", "kv", [2, 3, 7])
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.alloc("r1", "kv", [4, 5, 6, 7])
    p.write("r1", "kv", [4, 5, 6, 7])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(0, 4), dp.addr(0, 2), 64), (sp.addr(0, 5) + 32, dp.addr(0, 3) + 32, 96),
             (sp.addr(1, 6), dp.addr(1, 7), 128), (sp.addr(1, 7) + 10**6, dp.addr(0, 2) + 10**6, 64)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5, 6, 7])
    d.free("r1", "kv", [2, 3, 7])
    b.close()


def test_crosses_and_sk_are_the_stored_rules(tmp_path):
    path = str(tmp_path / "t.kvtrace")
    _trace(path)
    with TraceModel(path, keep_derived=False) as m:
        m.derive(["end_hold", "desc_end", "agent_ids", "slot_life"])
        cols = {c for (c,) in m.execute("SELECT column_name FROM (DESCRIBE desc_hold_ids)").fetchall()}
        assert not {"s_crosses", "d_crosses", "s_sk", "d_sk"} & cols   # computed in end_hold_ids, not stored
        got = m.execute("SELECT shard, xfer, pos, side, crosses, sk FROM end_hold ORDER BY ALL").fetchall()
        # crosses as desc_ends resolves it; sk as slot_ev keys a slot (its agent's home shard, agent, pool, slot)
        want = m.execute("""
            SELECT e.shard, e.xfer, e.pos, e.side, e.crosses, hash(a.h_shard, e.agent, e.pool, e.slot)
            FROM desc_end e LEFT JOIN agent_ids a USING (agent) ORDER BY ALL""").fetchall()
        assert got == want
        assert len(got) == 8
        # both ends of the mid-slot one, and the 128-byte one's source (its destination runs past
        # the region: no region covers it, so it crosses nothing)
        assert sum(1 for r in got if r[4]) == 3
        assert sum(1 for r in got if r[5] is not None) == 8
        # the key is slot_ev's: every held end's slot has its alloc under that key
        held = m.execute("""
            SELECT count(*), count(*) FILTER (WHERE EXISTS (
                       SELECT 1 FROM slot_life l WHERE l.sk = e.sk AND l.seq = e.alloc_seq AND l.kind = 'alloc'))
            FROM end_hold e WHERE e.alloc_seq IS NOT NULL""").fetchall()[0]
        assert held[0] >= 4 and held[0] == held[1]
