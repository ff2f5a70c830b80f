-- lay: the layout regions, one row per (agent, pool, layer, part) region (layouts may
-- repeat a region per shard that recorded it).
-- requires: layouts
-- Columns: agent, pool VARCHAR, layer INTEGER, part VARCHAR, addr, nbytes, slot_bytes UBIGINT,
--   num_slots BIGINT, page_tokens INTEGER
CREATE OR REPLACE TABLE lay AS
SELECT DISTINCT agent, pool, layer, part, addr, nbytes, slot_bytes, num_slots, page_tokens FROM layouts;
