-- naive read_before_done: a read of a slot that a transfer of the same request writes,
-- before the reading shard received that request's completion notification.
WITH rd AS (
    SELECT shard, seq, agent, pool, layer, request, unnest(slots) AS slot FROM events WHERE kind = 'read'
), post AS (
    SELECT shard, xfer, request FROM events WHERE kind = 'xfer_post'
), dst AS (
    SELECT DISTINCT p.request, d.dst_agent AS agent, l.pool, l.layer, (d.dst_addr - l.addr) // l.slot_bytes AS slot
    FROM descs d JOIN post p USING (shard, xfer)
    JOIN layouts l ON l.agent = d.dst_agent AND d.dst_addr >= l.addr AND d.dst_addr < l.addr + l.nbytes
), notif AS (
    SELECT shard, request, min(seq) AS notif_seq FROM events WHERE kind = 'notif_recv' GROUP BY ALL
)
SELECT 'read_before_done' AS hazard, r.agent, r.request, r.pool, r.slot, r.shard, r.seq
FROM rd r JOIN dst USING (request, agent, pool, layer, slot)
LEFT JOIN notif n ON n.shard = r.shard AND n.request = r.request
WHERE n.notif_seq IS NULL OR r.seq < n.notif_seq
