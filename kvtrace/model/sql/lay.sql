-- lay: the layout regions, one row per (agent, pool, layer, part) region (layouts may
-- repeat a region per shard that recorded it).
-- requires: layouts
-- Columns: agent, pool VARCHAR, layer INTEGER, part VARCHAR, addr, nbytes, slot_bytes UBIGINT,
--   num_slots BIGINT, page_tokens INTEGER,
--   pid, part_id INTEGER  -- 1-based ids of the pool and the part in name order (null: no name):
--                            the narrow tables (desc_hold_ids, desc_match_ids) store these, id_names
--                            gives the names back
CREATE OR REPLACE TABLE lay AS
SELECT *, CASE WHEN pool IS NOT NULL THEN dense_rank() OVER (ORDER BY pool) END::INTEGER AS pid,
       CASE WHEN part IS NOT NULL THEN dense_rank() OVER (ORDER BY part) END::INTEGER AS part_id
FROM (SELECT DISTINCT agent, pool, layer, part, addr, nbytes, slot_bytes, num_slots, page_tokens FROM layouts);
