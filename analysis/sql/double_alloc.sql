-- check: double_alloc
-- severity: error
-- needs: slots
-- summary: a slot was allocated while still held, without being a shared prefix reference
-- explain: An alloc not marked shared (detail {"shared": true}) of a slot that some
--   request still holds (reference count above zero) hands the same memory to two
--   owners. Shared prefix-cache references are counted and are legal.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR, request VARCHAR, pool VARCHAR
--   layer INTEGER      -- null (allocation is per slot, all layers)
--   slot BIGINT, slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first double allocs
--   count BIGINT       -- double allocs
--   message VARCHAR
-- Read from slot_life_ids (integer shard and agent, named once per row found: id_names),
-- not through the slot_life view, which names every alloc/free row.
SELECT 'error' AS severity, agent, request, pool, NULL::INTEGER AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots, list(DISTINCT ev(shard, seq) ORDER BY ev(shard, seq))[1:4] AS events, count(*) AS count,
       format('{} allocated slot(s) {} of pool {} to request {} while another holder still had them (not a shared prefix reference): two requests now own the same KV memory.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request) AS message
FROM (SELECT n.shards[s.sidx + 1] AS shard, s.seq, n.agents[s.aid] AS agent, s.request, s.pool, s.slot
      FROM slot_life_ids s, id_names n WHERE s.alloc AND NOT s.shared AND s.cnt_after > 1)
GROUP BY agent, request, pool ORDER BY min(seq);
