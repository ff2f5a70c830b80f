-- export_read_flows: the reads that consumed a transfer's data. Each destination end of a
-- transfer is the trace model's descriptor end (desc_end: agent, pool, layer, slot); the
-- flow goes to the first read of that slot by the transfer's request on that agent.
-- Columns:
--   src_shard, xfer      the transfer
--   dst_shard, dst_seq   the read event that consumed (part of) its data
WITH dslots AS (
    SELECT DISTINCT shard, xfer, agent, pool, layer, slot
    FROM desc_end WHERE side = 'dst' AND pool IS NOT NULL
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
