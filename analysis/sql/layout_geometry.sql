-- query layout_geometry: each agent's registered geometry per buffer class (pool, K/V part).
-- Columns:
--   agent, pool VARCHAR, part VARCHAR ('' when the layout has no part)
--   slot_bytes UBIGINT, page_tokens INTEGER, dtype VARCHAR, num_slots BIGINT  -- (the smallest
--                        over its regions when they disagree; *_varies says so)
--   regions BIGINT      -- layer regions registered
--   varies BOOLEAN      -- its regions disagree on slot bytes, page tokens, dtype or slot count
SELECT agent, pool, coalesce(part, '') AS part, min(slot_bytes) AS slot_bytes, min(page_tokens) AS page_tokens,
       min(dtype) AS dtype, min(num_slots) AS num_slots, count(DISTINCT layer) AS regions,
       count(DISTINCT (slot_bytes, page_tokens, dtype, num_slots)) > 1 AS varies
FROM layouts GROUP BY ALL ORDER BY agent, pool, part;
