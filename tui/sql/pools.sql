-- pools: every (agent, pool) the slot map can show, with its slot count and layers.
-- From layouts when described there, else from the slots its alloc/free events name.
-- Columns: agent, pool, num_slots, layers
SELECT agent, pool, max(num_slots)::BIGINT AS num_slots, count(DISTINCT layer)::BIGINT AS layers
FROM layouts GROUP BY agent, pool
UNION ALL
SELECT agent, pool, max(slot) + 1, 0
FROM read_parquet('{slots}') s
WHERE NOT EXISTS (SELECT 1 FROM layouts l WHERE l.agent = s.agent AND l.pool = s.pool)
GROUP BY agent, pool
ORDER BY agent, pool
