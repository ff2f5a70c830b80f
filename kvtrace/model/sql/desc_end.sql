-- desc_end: both ends of every descriptor resolved through layouts to
-- (agent, pool, layer, slot, offset), one row per end: desc_ends' ends (resolved there, side
-- by side), each read once.
-- requires: desc_ends
-- Columns:
--   shard VARCHAR, xfer BIGINT, pos INTEGER  -- the descriptor (initiator shard)
--   side VARCHAR        -- src | dst (the direction bytes move)
--   agent VARCHAR, addr UBIGINT, nbytes UBIGINT
--   dlist BIGINT, idx BIGINT   -- prepped list and index used (null: not prepped)
--   pool VARCHAR, layer INTEGER, part VARCHAR  -- the layout region (null: none covers it)
--   slot BIGINT, off BIGINT    -- slot within the region, byte offset within the slot
--   slot_bytes UBIGINT, num_slots BIGINT
--   crosses BOOLEAN     -- the range runs past the end of its slot
--   pid, part_id INTEGER  -- the region's pool and part ids (lay; null: none covers it)
-- A view, not a table: the analysis reads the ends side by side (desc_hold_ids, from desc_ends);
-- readers outside it (replay, export) compute it where they read it.
CREATE OR REPLACE VIEW desc_end AS
SELECT shard, xfer, pos, 'src' AS side, s_agent AS agent, s_addr AS addr, nbytes, s_dlist AS dlist, s_idx AS idx,
       s_pool AS pool, s_layer AS layer, s_part AS part, s_slot AS slot, s_off AS off, s_slot_bytes AS slot_bytes,
       s_num_slots AS num_slots, s_crosses AS crosses, s_pid AS pid, s_part_id AS part_id
FROM desc_ends WHERE d_first   -- each source end once (with its destination end's first region)
UNION ALL
SELECT shard, xfer, pos, 'dst', d_agent, d_addr, nbytes, d_dlist, d_idx, d_pool, d_layer, d_part, d_slot, d_off,
       d_slot_bytes, d_num_slots, d_crosses, d_pid, d_part_id
FROM desc_ends WHERE s_first;
