-- xfer_descs: the descriptors of one transfer with both ends resolved to (pool, layer, slot,
-- offset, page held by the request at the post) and whether they agree: the model's
-- desc_match, the view the layer_offset_mismatch check reads. Unresolved ends have null pool.
-- Parameters: shard, xfer, limit
-- Columns: pos, op, nbytes, src_agent, src_addr, src_pool, src_layer, src_slot, src_off,
--          src_slot_bytes, src_page, dst_agent, dst_addr, dst_pool, dst_layer, dst_slot, dst_off,
--          dst_slot_bytes, dst_page, src_idx, dst_idx, problem (null: the descriptor is right)
SELECT m.pos, d.op, m.nbytes,
       m.s_agent AS src_agent, m.s_addr AS src_addr, m.s_pool AS src_pool, m.s_layer AS src_layer,
       m.s_slot AS src_slot, m.s_off AS src_off, m.s_slot_bytes AS src_slot_bytes, m.s_page AS src_page,
       m.d_agent AS dst_agent, m.d_addr AS dst_addr, m.d_pool AS dst_pool, m.d_layer AS dst_layer,
       m.d_slot AS dst_slot, m.d_off AS dst_off, m.d_slot_bytes AS dst_slot_bytes, m.d_page AS dst_page,
       m.s_idx AS src_idx, m.d_idx AS dst_idx, m.problem
FROM desc_match m JOIN descs d USING (shard, xfer, pos)
WHERE m.shard = ?1 AND m.xfer = ?2
ORDER BY m.pos
LIMIT ?3
