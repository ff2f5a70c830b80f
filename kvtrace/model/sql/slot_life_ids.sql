-- slot_life_ids: slot_life's rows (the rules are here), stored with small integer ids in place
-- of the names (the view slot_life gives them back from id_names): the two window sorts carry
-- every column of every alloc/free row, and an integer is cheaper to carry and to store than
-- a name (10M events, 3.4M rows: ~-1 of the sorts' ~5 cpu-s without shard, agent, kind).
-- requires: slot_ev, agent_ids
-- Columns: slot_life's, with these in place of its names:
--   sidx INTEGER   -- the shard (shards.sidx; slot_life.shard)
--   aid INTEGER    -- the agent (agent_ids; slot_life.agent)
--   alloc BOOLEAN  -- an alloc row (slot_life.kind 'alloc'; else 'free')
--   the rest as slot_life: seq, request, pool, slot, page, shared, sk, hk, cnt_after, req_cnt_after, free_seq
CREATE OR REPLACE TABLE slot_life_ids AS
SELECT sidx, seq, aid, alloc, request, pool, slot, page, shared, sk, hk,
       sum(CASE WHEN alloc THEN 1 ELSE -1 END) OVER (
           PARTITION BY sk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS cnt_after,
       sum(CASE WHEN alloc THEN 1 ELSE -1 END) OVER (
           PARTITION BY hk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS req_cnt_after,
       CASE WHEN NOT lead(alloc) OVER (PARTITION BY hk ORDER BY seq)
            THEN lead(seq) OVER (PARTITION BY hk ORDER BY seq) END AS free_seq
FROM (SELECT e.sidx, e.seq, a.aid, e.kind = 'alloc' AS alloc, e.request, e.pool, e.slot, e.page, e.shared, e.sk, e.hk
      FROM slot_ev e LEFT JOIN agent_ids a ON a.agent = e.agent
      WHERE e.kind IN ('alloc', 'free'));
