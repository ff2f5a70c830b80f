-- query layout_geometry: each agent's registered geometry per buffer class (pool, K/V part),
-- and per layer: a pool's layers may differ (a KV-head count or head size per layer,
-- layer groups with their own page size), so a class has one value of a field only where
-- all its regions agree on it.
-- Columns:
--   agent, pool VARCHAR, part VARCHAR ('' when the layout has no part)
--   slot_bytes UBIGINT, page_tokens INTEGER, dtype VARCHAR, num_slots BIGINT  -- the value all
--                        the class's regions register (null where they differ: see per_layer)
--   regions BIGINT      -- layer regions registered
--   varies BOOLEAN      -- its regions disagree on slot bytes, page tokens, dtype or slot count
--   per_layer STRUCT(layer INTEGER, slot_bytes UBIGINT, page_tokens INTEGER, dtype VARCHAR,
--                    num_slots BIGINT)[]  -- each region's geometry, by layer
WITH r AS (
    SELECT DISTINCT agent, pool, coalesce(part, '') AS part, layer, slot_bytes, page_tokens, dtype, num_slots FROM layouts
)
-- one value: one distinct non-null value and no null beside it, or nulls alone
SELECT agent, pool, part,
       CASE WHEN count(DISTINCT slot_bytes) + (count(slot_bytes) < count(*))::INTEGER <= 1 THEN min(slot_bytes) END AS slot_bytes,
       CASE WHEN count(DISTINCT page_tokens) + (count(page_tokens) < count(*))::INTEGER <= 1 THEN min(page_tokens) END AS page_tokens,
       CASE WHEN count(DISTINCT dtype) + (count(dtype) < count(*))::INTEGER <= 1 THEN min(dtype) END AS dtype,
       CASE WHEN count(DISTINCT num_slots) + (count(num_slots) < count(*))::INTEGER <= 1 THEN min(num_slots) END AS num_slots,
       count(DISTINCT layer) AS regions,
       count(DISTINCT (slot_bytes, page_tokens, dtype, num_slots)) > 1 AS varies,
       list({'layer': layer, 'slot_bytes': slot_bytes, 'page_tokens': page_tokens, 'dtype': dtype, 'num_slots': num_slots}
            ORDER BY layer, slot_bytes, page_tokens, dtype, num_slots) AS per_layer
FROM r GROUP BY ALL ORDER BY agent, pool, part;
