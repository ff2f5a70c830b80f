-- naive double_free: a slot freed again on its agent without an alloc in between.
WITH s AS (
    SELECT shard, seq, agent, pool, kind, request, unnest(slots) AS slot
    FROM events WHERE kind IN ('alloc', 'free')
), o AS (
    SELECT *, lag(kind) OVER (PARTITION BY agent, pool, slot ORDER BY shard, seq) AS prev
    FROM s
)
SELECT 'double_free' AS hazard, agent, request, pool, slot, shard, seq FROM o
WHERE kind = 'free' AND (prev = 'free' OR prev IS NULL)
