-- naive double_alloc: a slot allocated again on its agent without a free in between.
-- Straightforward SQL over the raw events (no derived tables), for bench_checks.py's ratio.
WITH s AS (
    SELECT shard, seq, agent, pool, kind, request, unnest(slots) AS slot
    FROM events WHERE kind IN ('alloc', 'free')
), o AS (
    SELECT *, lag(kind) OVER (PARTITION BY agent, pool, slot ORDER BY shard, seq) AS prev
    FROM s
)
SELECT 'double_alloc' AS hazard, agent, request, pool, slot, shard, seq FROM o
WHERE kind = 'alloc' AND prev = 'alloc'
