-- export_read_flows: the reads that consumed a transfer's data. Each destination byte
-- range of a transfer is resolved through `layouts` to (agent, pool, layer, slot); the
-- flow goes to the first read of that slot by the transfer's request on that agent.
-- Columns:
--   src_shard, xfer      the transfer
--   dst_shard, dst_seq   the read event that consumed (part of) its data
WITH dslots AS (
    SELECT DISTINCT d.shard, d.xfer, d.dst_agent AS agent, l.pool, l.layer,
           ((d.dst_addr - l.addr) // l.slot_bytes)::BIGINT AS slot
    FROM descs d
    JOIN layouts l ON l.agent = d.dst_agent
                  AND d.dst_addr >= l.addr AND d.dst_addr < l.addr + l.nbytes
    WHERE l.slot_bytes > 0
), x AS (
    SELECT ds.*, p.request
    FROM dslots ds
    JOIN events p ON p.shard = ds.shard AND p.xfer = ds.xfer AND p.kind = 'xfer_post'
), rd AS (
    SELECT shard, seq, agent, request, pool, layer, unnest(slots) AS slot
    FROM events WHERE kind = 'read'
), firsts AS (
    SELECT x.shard AS src_shard, x.xfer, rd.shard AS dst_shard, min(rd.seq) AS dst_seq
    FROM x
    JOIN rd ON rd.agent = x.agent AND rd.request = x.request AND rd.pool = x.pool
           AND rd.layer = x.layer AND rd.slot = x.slot
    GROUP BY x.shard, x.xfer, x.pool, x.layer, x.slot, rd.shard
)
SELECT DISTINCT src_shard, xfer, dst_shard, dst_seq FROM firsts
