-- xfer_descs: the descriptors of one transfer with both ends resolved through layouts
-- to (pool, layer, slot, offset); unresolved ends have null pool.
-- Parameters: shard, xfer
-- Columns: pos, op, nbytes, src_agent, src_addr, src_pool, src_layer, src_slot, src_off,
--          src_slot_bytes, dst_agent, dst_addr, dst_pool, dst_layer, dst_slot, dst_off,
--          dst_slot_bytes, src_idx, dst_idx
WITH d AS (SELECT * FROM descs WHERE shard = ?1 AND xfer = ?2),
lay AS (SELECT DISTINCT agent, pool, layer, addr, nbytes, slot_bytes FROM layouts)
SELECT d.pos, d.op, d.nbytes,
       d.src_agent, d.src_addr, s.pool AS src_pool, s.layer AS src_layer,
       ((d.src_addr - s.addr) // s.slot_bytes)::BIGINT AS src_slot,
       ((d.src_addr - s.addr) % s.slot_bytes)::BIGINT AS src_off, s.slot_bytes AS src_slot_bytes,
       d.dst_agent, d.dst_addr, t.pool AS dst_pool, t.layer AS dst_layer,
       ((d.dst_addr - t.addr) // t.slot_bytes)::BIGINT AS dst_slot,
       ((d.dst_addr - t.addr) % t.slot_bytes)::BIGINT AS dst_off, t.slot_bytes AS dst_slot_bytes,
       d.src_idx, d.dst_idx
FROM d
LEFT JOIN lay s ON s.agent = d.src_agent AND d.src_addr >= s.addr AND d.src_addr < s.addr + s.nbytes
LEFT JOIN lay t ON t.agent = d.dst_agent AND d.dst_addr >= t.addr AND d.dst_addr < t.addr + t.nbytes
ORDER BY d.pos
LIMIT {limit}
