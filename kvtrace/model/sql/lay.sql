-- lay: the layout regions, one row per (agent, pool, layer, part) region (layouts may
-- repeat a region per shard that recorded it).
-- requires: layouts
-- Columns: agent, pool VARCHAR, layer INTEGER, part VARCHAR, addr, nbytes, slot_bytes UBIGINT,
--   num_slots BIGINT, page_tokens INTEGER,
--   pid, part_id INTEGER  -- 1-based ids of the pool and the part (a null one has its own): the
--                            narrow tables (end_hold_ids) store these instead of the names
CREATE OR REPLACE TABLE lay AS
SELECT *, dense_rank() OVER (ORDER BY pool)::INTEGER AS pid, dense_rank() OVER (ORDER BY part)::INTEGER AS part_id
FROM (SELECT DISTINCT agent, pool, layer, part, addr, nbytes, slot_bytes, num_slots, page_tokens FROM layouts);
