-- inflight: transfers posted at or before the cursor and not yet seen to end there
-- (no xfer_done/xfer_error/xfer_release by the initiator, no paired notification),
-- with the slots of one (agent, pool) their descriptors read from or write into.
-- Parameters: ord, agent, pool
-- Columns: shard, xfer, request, dir ('out': bytes leave the slot; 'in': land in it),
--          slot, layer
WITH posts AS (
    SELECT shard, xfer, request FROM tl WHERE kind = 'xfer_post' AND ord <= ?1
), ended AS (
    SELECT shard, xfer FROM tl WHERE kind IN ('xfer_done', 'xfer_error', 'xfer_release') AND ord <= ?1
    UNION
    SELECT pair_shard, pair_xfer FROM tl WHERE kind = 'notif_recv' AND ord <= ?1 AND pair_xfer IS NOT NULL
), live AS (
    SELECT * FROM posts p WHERE NOT EXISTS (SELECT 1 FROM ended e WHERE e.shard = p.shard AND e.xfer = p.xfer)
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
