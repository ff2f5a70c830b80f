-- inflight: transfers posted at or before the cursor and not yet seen to end there
-- (no xfer_done/xfer_error/xfer_release by the initiator, no paired notification),
-- with the slots of one (agent, pool) their descriptors read from or write into.
-- Parameters: ord, agent, pool
-- Columns: shard, xfer, request, dir ('out': bytes leave the slot; 'in': land in it),
--          slot, layer
WITH live AS (
    SELECT shard, xfer, request FROM read_parquet('{xfers}')
    WHERE post_ord <= ?1 AND (end_ord IS NULL OR end_ord > ?1)
), lay AS (
    SELECT agent, layer, addr, nbytes, slot_bytes FROM layouts WHERE agent = ?2 AND pool = ?3
), ends AS (
    SELECT d.shard, d.xfer, 'out' AS dir, d.src_agent AS agent, d.src_addr AS addr
    FROM descs d SEMI JOIN live USING (shard, xfer)
    UNION ALL
    SELECT d.shard, d.xfer, 'in', d.dst_agent, d.dst_addr
    FROM descs d SEMI JOIN live USING (shard, xfer)
)
SELECT DISTINCT e.shard, e.xfer, live.request, e.dir,
       ((e.addr - l.addr) // l.slot_bytes)::BIGINT AS slot, l.layer
FROM ends e JOIN live USING (shard, xfer)
JOIN lay l ON e.agent = l.agent AND e.addr >= l.addr AND e.addr < l.addr + l.nbytes
ORDER BY slot
