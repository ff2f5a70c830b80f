-- allocs_elsewhere: allocations recorded by another process than the one the agent lives in
-- (its home shard, agent_home), per agent, pool and recording shard. The model orders an
-- agent's holdings with its transfers and reads only on the home shard, so such a pool is
-- left unmanaged (managed.sql): whether its slots were held is not checked, and this says so.
-- Columns: agent, pool, recorded_on, home VARCHAR; n BIGINT (alloc events)
SELECT e.agent, e.pool, e.shard AS recorded_on, a.h_shard AS home, count(*) AS n
FROM events e JOIN agent_home a ON a.agent = e.agent
WHERE e.kind = 'alloc' AND e.shard <> a.h_shard
  -- a pool with allocations on the home shard too is managed there: only the rest are lost
  AND NOT EXISTS (SELECT 1 FROM managed m WHERE m.agent = e.agent AND m.pool = e.pool)
GROUP BY ALL ORDER BY e.agent, e.pool, recorded_on;
