-- tui_slots: the slot ownership history — one row per (alloc|free event, slot), sorted
-- by (agent, pool, ord) so the slot map computes owners at any moment with one scan
-- of its pool's rows.
-- Columns: agent, pool, slot, request, ord, delta (+1 alloc, -1 free), shared
COPY (
    SELECT agent, pool, unnest(slots) AS slot, request, ord,
           CASE kind WHEN 'alloc' THEN 1 ELSE -1 END AS delta,
           coalesce(json_extract(detail, '$.shared')::BOOLEAN, false) AS shared
    FROM read_parquet('{events}')
    WHERE kind IN ('alloc', 'free') AND slots IS NOT NULL
    ORDER BY agent, pool, ord
) TO '{out}' (FORMAT parquet, ROW_GROUP_SIZE 16384, COMPRESSION zstd)
