-- check: leak
-- severity: warning
-- needs: closed
-- summary: slots still held, or transfers never completed nor released, when the trace ends
-- explain: At the end of a complete trace (every shard present and closed), every slot a
--   request allocated should be freed and every posted transfer should have completed,
--   failed or been released. What remains held is reported per (agent, pool, request);
--   transfers left open per initiator and request.
-- Columns:
--   severity VARCHAR   -- 'warning'
--   agent VARCHAR, request VARCHAR, pool VARCHAR (null for transfers)
--   layer INTEGER      -- null
--   slot BIGINT, slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- the allocs (or posts) never undone
--   count BIGINT       -- slots held (or transfers open)
--   what VARCHAR       -- slots | transfers
--   message VARCHAR
WITH last AS (   -- per holding key (hk: shard, agent, pool, slot, request) its last event; integers only
    SELECT hk, arg_max(req_cnt_after, seq) AS held, max(seq) AS seq FROM slot_life_ids GROUP BY hk
), held AS (   -- the names of the few still held (slot_life_ids' ids named here, for those alone)
    SELECT any_value(n.shards[l.sidx + 1]) AS shard, any_value(n.agents[l.aid]) AS agent, any_value(l.pool) AS pool,
           any_value(l.slot) AS slot, any_value(l.request) AS request, any_value(h.held) AS held, h.seq
    FROM (SELECT * FROM last WHERE held > 0) h JOIN slot_life_ids l ON l.hk = h.hk AND l.seq = h.seq, id_names n
    GROUP BY h.hk, h.seq
),
open_x AS (SELECT * FROM xfers WHERE done_seq IS NULL AND err_seq IS NULL AND release_seq IS NULL)
SELECT 'warning' AS severity, agent, request, pool, NULL::INTEGER AS layer, min(slot) AS slot,
       list(slot ORDER BY slot) AS slots, list(ev(shard, seq) ORDER BY seq)[1:4] AS events, count(*) AS count,
       'slots' AS what,
       format('{} still holds {} slot(s) of pool {} for request {} when the trace ends (first: {}).',
              agent, count(*), pool, request, array_to_string(list(slot ORDER BY slot)[1:8], ',')) AS message
FROM held GROUP BY agent, request, pool
UNION ALL
SELECT 'warning', agent, request, NULL, NULL, NULL, NULL, list(ev(shard, post_seq) ORDER BY post_seq)[1:4], count(*),
       'transfers',
       format('{} posted {} transfer(s) for request {} that never completed, failed or were released before the trace ended.',
              agent, count(*), request)
FROM open_x GROUP BY agent, request;
