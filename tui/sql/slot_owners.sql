-- slot_owners: who holds each slot of one (agent, pool) at one moment of the timeline
-- (every alloc/free with ord <= the cursor, counted by reference).
-- Parameters: agent, pool, ord
-- Columns: slot, request, refs (references held), shared
SELECT slot, request, sum(delta)::BIGINT AS refs, bool_or(shared) AS shared
FROM read_parquet('{slots}')
WHERE agent = ?1 AND pool = ?2 AND ord <= ?3
GROUP BY slot, request
HAVING sum(delta) > 0
ORDER BY slot, request
