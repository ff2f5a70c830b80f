-- naive write_after_free: a write to a slot whose latest alloc/free before it (same agent,
-- pool, shard) is a free, or that was never allocated.
WITH sl AS (
    SELECT shard, seq, agent, pool, kind, unnest(slots) AS slot
    FROM events WHERE kind IN ('alloc', 'free')
), w AS (
    SELECT shard, seq, agent, pool, layer, request, unnest(slots) AS slot
    FROM events WHERE kind = 'write'
)
SELECT 'write_after_free' AS hazard, w.agent, w.request, w.pool, w.slot, w.shard, w.seq
FROM w ASOF LEFT JOIN sl ON sl.shard = w.shard AND sl.agent = w.agent AND sl.pool = w.pool
                         AND sl.slot = w.slot AND w.seq > sl.seq
WHERE sl.kind IS NULL OR sl.kind = 'free'
