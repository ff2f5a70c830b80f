-- check: double_free
-- severity: error
-- needs: slots
-- summary: a request freed a slot it did not hold
-- explain: A free by a request whose reference count on the slot is already zero (never
--   allocated, or freed twice) corrupts the allocator's free list or drops another
--   holder's reference.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR, request VARCHAR, pool VARCHAR
--   layer INTEGER      -- null
--   slot BIGINT, slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first bad frees
--   count BIGINT       -- bad frees
--   message VARCHAR
-- Read from slot_life_ids (integer shard and agent, named once per row found: id_names),
-- not through the slot_life view, which names every alloc/free row.
SELECT 'error' AS severity, agent, request, pool, NULL::INTEGER AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots, list(DISTINCT ev(shard, seq) ORDER BY ev(shard, seq))[1:4] AS events, count(*) AS count,
       format('{} freed slot(s) {} of pool {} for request {} which did not hold them (double free or free without alloc).',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request) AS message
FROM (SELECT n.shards[s.sidx + 1] AS shard, s.seq, n.agents[s.aid] AS agent, s.request, s.pool, s.slot
      FROM slot_life_ids s, id_names n WHERE NOT s.alloc AND s.req_cnt_after < 0)
GROUP BY agent, request, pool ORDER BY min(seq);
