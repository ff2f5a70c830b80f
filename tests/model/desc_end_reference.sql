-- desc_end_reference: the descriptor ends resolved one row per end, as desc_end derived them
-- before desc_ends (both ends of a descriptor in one row): the two ends stacked, then one
-- range join of every end on the layout regions. tests/model/test_desc_ends.py compares the
-- model's desc_end and desc_ends with it, overlapping regions included.
CREATE OR REPLACE VIEW desc_end_reference AS
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
