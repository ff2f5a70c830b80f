-- inflight_ends: the descriptor ends inflight_pairs (inflight.py) sweeps: every end with
-- an agent and an address (the others have no neighbours), with what a pair reports, and
-- integer codes the sweep sorts and compares by instead of the strings (dictionary-encoding
-- 13.6M strings in Python cost ~1.8 s at 10M events).
-- Columns: agent, shard, side, request, pool VARCHAR, addr, nbytes UBIGINT, t_ns, post_seq BIGINT,
--   pos INTEGER, xfer BIGINT, psidx INTEGER, layer INTEGER, slot BIGINT,
--   agent_code BIGINT   -- the agent's rank among the swept agents (equal agents, equal codes)
--   side_code INTEGER   -- 0 dst, 1 src (a descriptor end's side is one of the two)
WITH ag AS (
    SELECT agent, row_number() OVER (ORDER BY agent) AS agent_code
    FROM (SELECT DISTINCT agent FROM end_hold WHERE agent IS NOT NULL AND addr IS NOT NULL)
)
SELECT e.agent, e.shard, e.side, e.request, e.pool, e.addr, e.nbytes, e.t_ns, e.post_seq, e.pos, e.xfer,
       e.psidx, e.layer, e.slot, ag.agent_code, CASE e.side WHEN 'dst' THEN 0 WHEN 'src' THEN 1 END AS side_code
FROM end_hold e JOIN ag ON ag.agent = e.agent WHERE e.addr IS NOT NULL
