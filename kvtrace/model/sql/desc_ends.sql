-- desc_ends: every descriptor with both its ends side by side, each resolved through layouts
-- to (agent, pool, layer, slot, offset) by a range join on the layout regions: the one place
-- an end is resolved (desc_end gives the same ends one row per end).
-- requires: descs, lay
-- Columns:
--   shard VARCHAR, xfer BIGINT, pos INTEGER, nbytes UBIGINT  -- the descriptor (initiator shard)
--   s_agent VARCHAR, s_addr UBIGINT, s_dlist BIGINT, s_idx BIGINT  -- its source end (dlist, idx:
--                       the prepped list and index used; null: not prepped)
--   s_pool VARCHAR, s_layer INTEGER, s_part VARCHAR  -- the layout region (null: none covers the end)
--   s_slot BIGINT, s_off BIGINT    -- slot within the region, byte offset within the slot
--   s_slot_bytes UBIGINT, s_num_slots BIGINT
--   s_crosses BOOLEAN   -- the range runs past the end of its slot
--   s_pid, s_part_id INTEGER  -- the region's pool and part ids (lay; null: none covers it)
--   s_first BOOLEAN     -- the region is the first (in a fixed order of the agent's regions) that
--                          covers the source address: true unless the agent's regions overlap there
--   d_agent ... d_first -- the destination end, likewise
-- Where layout regions overlap, an end falls in several: the descriptor then has one row per
-- pair of its ends' regions (as a join of the two ends would give), and each end is read once
-- from the rows where the other end's region is the first (desc_end, end_hold_ids).
-- A view, not a table: desc_hold_ids, the one object of the analysis that reads it, stores
-- every column of it beside its own. A descriptor of zero bytes (a padded list's filler) moves
-- nothing: it has no ends here, so no check sees it (its address need not be owned or in bounds). (The range join is a hash join on the agent: layouts are
-- few, and an ASOF join would sort every descriptor.)
CREATE OR REPLACE VIEW desc_ends AS
WITH r AS (
    SELECT *, row_number() OVER (PARTITION BY agent ORDER BY addr, nbytes, pool, layer, part, slot_bytes,
                                                              num_slots, page_tokens) AS r
    FROM lay
), l AS (   -- each region with the earlier regions of its agent that overlap it (null: none, the usual case)
    SELECT a.agent, a.r, a.pool, a.layer, a.part, a.pid, a.part_id, a.addr, a.nbytes, a.slot_bytes, a.num_slots,
           list({'addr': o.addr, 'nbytes': o.nbytes}) FILTER (WHERE o.r IS NOT NULL) AS lower
    FROM r a LEFT JOIN r o ON o.agent = a.agent AND o.r < a.r AND o.addr < a.addr + a.nbytes AND a.addr < o.addr + o.nbytes
    GROUP BY ALL   -- (a.r: one group per region of lay)
), j AS (
    SELECT d.shard, d.xfer, d.pos, d.nbytes,
           d.src_agent AS s_agent, d.src_addr AS s_addr, d.src_dlist AS s_dlist, d.src_idx AS s_idx,
           s.pool AS s_pool0, s.layer AS s_layer0, s.part AS s_part0, s.pid AS s_pid0, s.part_id AS s_part_id0,
           s.addr AS s_l_addr, s.slot_bytes AS s_slot_bytes0, s.num_slots AS s_num_slots0,
           s.addr IS NOT NULL AND d.src_addr + d.nbytes <= s.addr + s.nbytes AS s_inl,
           s.lower IS NULL OR len(list_filter(s.lower, lambda o: o.addr <= d.src_addr AND d.src_addr < o.addr + o.nbytes)) = 0
               AS s_first,
           d.dst_agent AS d_agent, d.dst_addr AS d_addr, d.dst_dlist AS d_dlist, d.dst_idx AS d_idx,
           t.pool AS d_pool0, t.layer AS d_layer0, t.part AS d_part0, t.pid AS d_pid0, t.part_id AS d_part_id0,
           t.addr AS d_l_addr, t.slot_bytes AS d_slot_bytes0, t.num_slots AS d_num_slots0,
           t.addr IS NOT NULL AND d.dst_addr + d.nbytes <= t.addr + t.nbytes AS d_inl,
           t.lower IS NULL OR len(list_filter(t.lower, lambda o: o.addr <= d.dst_addr AND d.dst_addr < o.addr + o.nbytes)) = 0
               AS d_first
    FROM descs d
    LEFT JOIN l s ON d.src_agent = s.agent AND d.src_addr >= s.addr AND d.src_addr < s.addr + s.nbytes
    LEFT JOIN l t ON d.dst_agent = t.agent AND d.dst_addr >= t.addr AND d.dst_addr < t.addr + t.nbytes
    WHERE d.nbytes > 0   -- a descriptor of no bytes touches no slot: it has no end to resolve
)
SELECT shard, xfer, pos, nbytes,
       s_agent, s_addr, s_dlist, s_idx,
       CASE WHEN s_inl THEN s_pool0 END AS s_pool, CASE WHEN s_inl THEN s_layer0 END AS s_layer,
       CASE WHEN s_inl THEN s_part0 END AS s_part,
       CASE WHEN s_inl THEN ((s_addr - s_l_addr) // s_slot_bytes0)::BIGINT END AS s_slot,
       CASE WHEN s_inl THEN ((s_addr - s_l_addr) % s_slot_bytes0)::BIGINT END AS s_off,
       CASE WHEN s_inl THEN s_slot_bytes0 END AS s_slot_bytes, CASE WHEN s_inl THEN s_num_slots0 END AS s_num_slots,
       coalesce(s_inl AND (s_addr - s_l_addr) % s_slot_bytes0 + nbytes > s_slot_bytes0, false) AS s_crosses,
       CASE WHEN s_inl THEN s_pid0 END AS s_pid, CASE WHEN s_inl THEN s_part_id0 END AS s_part_id, s_first,
       d_agent, d_addr, d_dlist, d_idx,
       CASE WHEN d_inl THEN d_pool0 END AS d_pool, CASE WHEN d_inl THEN d_layer0 END AS d_layer,
       CASE WHEN d_inl THEN d_part0 END AS d_part,
       CASE WHEN d_inl THEN ((d_addr - d_l_addr) // d_slot_bytes0)::BIGINT END AS d_slot,
       CASE WHEN d_inl THEN ((d_addr - d_l_addr) % d_slot_bytes0)::BIGINT END AS d_off,
       CASE WHEN d_inl THEN d_slot_bytes0 END AS d_slot_bytes, CASE WHEN d_inl THEN d_num_slots0 END AS d_num_slots,
       coalesce(d_inl AND (d_addr - d_l_addr) % d_slot_bytes0 + nbytes > d_slot_bytes0, false) AS d_crosses,
       CASE WHEN d_inl THEN d_pid0 END AS d_pid, CASE WHEN d_inl THEN d_part_id0 END AS d_part_id, d_first
FROM j;
