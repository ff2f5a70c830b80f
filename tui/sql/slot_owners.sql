-- slot_owners: who holds each slot of one (agent, pool) at one moment of the timeline:
-- the model's holdings whose alloc happened at or before the cursor and whose free did not.
-- Parameters: agent, pool, ord
-- Columns: slot, request, refs (holdings the request has of the slot), shared
SELECT slot, request, count(*)::BIGINT AS refs, bool_or(shared) AS shared
FROM slot_history
WHERE agent = ?1 AND pool = ?2 AND alloc_ord <= ?3 AND (free_ord IS NULL OR free_ord > ?3)
GROUP BY slot, request
ORDER BY slot, request
