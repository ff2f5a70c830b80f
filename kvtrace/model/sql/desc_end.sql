-- desc_end: both ends of every descriptor resolved through layouts to
-- (agent, pool, layer, slot, offset) by a range join on the layout regions.
-- requires: descs, lay
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
-- A view, not a table: end_hold, the one object of the analysis that reads it, stores every
-- column of it beside its own, so storing the rows twice only cost time (~0.4 cpu-s at 1M
-- events: a quarter of it the range join, the rest writing 1.36M rows). Readers outside the
-- analysis (replay, export, the TUI) compute it where they read it. (With the end_hold of
-- 2026-12-03, DuckDB 1.x misestimated the view's range join and hashed the 1.36M-row side
-- there; end_hold's plan today builds on lay, agent_home, xfers: EXPLAIN it after changes.)
CREATE OR REPLACE VIEW desc_end AS
WITH d AS (
    SELECT shard, xfer, pos, nbytes, 'src' AS side, src_agent AS agent, src_addr AS addr,
           src_dlist AS dlist, src_idx AS idx FROM descs
    UNION ALL
    SELECT shard, xfer, pos, nbytes, 'dst', dst_agent, dst_addr, dst_dlist, dst_idx FROM descs
), j AS (
    SELECT d.*, l.pool, l.layer, l.part, l.pid, l.part_id, l.addr AS l_addr, l.nbytes AS l_nbytes, l.slot_bytes, l.num_slots
    -- a range hash join: layouts are few, and an ASOF join would sort every descriptor
    FROM d LEFT JOIN lay l ON d.agent = l.agent AND d.addr >= l.addr AND d.addr < l.addr + l.nbytes
)
SELECT shard, xfer, pos, side, agent, addr, nbytes, dlist, idx,
       CASE WHEN inl THEN pool END AS pool, CASE WHEN inl THEN layer END AS layer,
       CASE WHEN inl THEN part END AS part,
       CASE WHEN inl THEN ((addr - l_addr) // slot_bytes)::BIGINT END AS slot,
       CASE WHEN inl THEN ((addr - l_addr) % slot_bytes)::BIGINT END AS off,
       CASE WHEN inl THEN slot_bytes END AS slot_bytes, CASE WHEN inl THEN num_slots END AS num_slots,
       coalesce(inl AND (addr - l_addr) % slot_bytes + nbytes > slot_bytes, false) AS crosses,
       CASE WHEN inl THEN pid END AS pid, CASE WHEN inl THEN part_id END AS part_id
FROM (SELECT *, l_addr IS NOT NULL AND addr + nbytes <= l_addr + l_nbytes AS inl FROM j);
