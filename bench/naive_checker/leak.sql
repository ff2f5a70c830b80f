-- naive leak: a slot whose last alloc/free event on its agent is an alloc (never freed).
WITH s AS (
    SELECT shard, seq, agent, pool, kind, request, unnest(slots) AS slot
    FROM events WHERE kind IN ('alloc', 'free')
), last AS (
    SELECT agent, pool, slot, arg_max(kind, seq) AS kind, arg_max(request, seq) AS request
    FROM s GROUP BY agent, pool, slot
)
SELECT 'leak' AS hazard, agent, request, pool, slot FROM last WHERE kind = 'alloc'
