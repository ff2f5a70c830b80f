-- pools: every (agent, pool) the slot map can show, with its slot count and layers.
-- From the layouts when described there, else from the slots its holdings name.
-- Columns: agent, pool, num_slots, layers
SELECT agent, pool, max(num_slots)::BIGINT AS num_slots, count(DISTINCT layer)::BIGINT AS layers
FROM lay GROUP BY agent, pool
UNION ALL
SELECT agent, pool, max(slot) + 1, 0
FROM slot_history s
WHERE NOT EXISTS (SELECT 1 FROM lay l WHERE l.agent = s.agent AND l.pool = s.pool)
GROUP BY agent, pool
ORDER BY agent, pool
