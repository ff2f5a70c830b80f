-- naive checksum_mismatch: a read whose checksum differs from what its slot should hold:
-- the latest local write to the slot layer before the read if that write is newer than
-- the slot's alloc, else the latest write of the source slot layer before the post of
-- the request's transfer into it.
WITH rd AS (
    SELECT shard, seq, agent, pool, layer, request, unnest(slots) AS slot, unnest(checksums) AS ck
    FROM events WHERE kind = 'read' AND checksums IS NOT NULL
), wr AS (
    SELECT shard, seq, agent, pool, layer, unnest(slots) AS slot, unnest(checksums) AS ck
    FROM events WHERE kind = 'write' AND checksums IS NOT NULL
), al AS (
    SELECT shard, seq, agent, pool, unnest(slots) AS slot FROM events WHERE kind = 'alloc'
), post AS (
    SELECT shard, xfer, seq AS post_seq, request FROM events WHERE kind = 'xfer_post'
), pairs AS (  -- descriptor: source slot layer -> destination slot layer
    SELECT DISTINCT p.shard, p.post_seq, p.request,
           d.src_agent, ls.pool AS src_pool, ls.layer AS src_layer, (d.src_addr - ls.addr) // ls.slot_bytes AS src_slot,
           d.dst_agent, ld.pool AS dst_pool, ld.layer AS dst_layer, (d.dst_addr - ld.addr) // ld.slot_bytes AS dst_slot
    FROM descs d JOIN post p USING (shard, xfer)
    JOIN layouts ls ON ls.agent = d.src_agent AND d.src_addr >= ls.addr AND d.src_addr < ls.addr + ls.nbytes
    JOIN layouts ld ON ld.agent = d.dst_agent AND d.dst_addr >= ld.addr AND d.dst_addr < ld.addr + ld.nbytes
), src_ck AS (  -- what each transfer carried: the source's latest write before the post
    SELECT pairs.*, w.ck
    FROM pairs ASOF LEFT JOIN wr w ON w.shard = pairs.shard AND w.agent = pairs.src_agent AND w.pool = pairs.src_pool
        AND w.layer = pairs.src_layer AND w.slot = pairs.src_slot AND pairs.post_seq > w.seq
), r1 AS (  -- the read's latest local write and latest alloc
    SELECT rd.*, w.seq AS w_seq, w.ck AS w_ck
    FROM rd ASOF LEFT JOIN wr w ON w.shard = rd.shard AND w.agent = rd.agent AND w.pool = rd.pool
        AND w.layer = rd.layer AND w.slot = rd.slot AND rd.seq > w.seq
), r2 AS (
    SELECT r1.*, a.seq AS a_seq
    FROM r1 ASOF LEFT JOIN al a ON a.shard = r1.shard AND a.agent = r1.agent AND a.pool = r1.pool
        AND a.slot = r1.slot AND r1.seq > a.seq
), pred AS (
    SELECT r2.*, CASE WHEN w_seq > a_seq THEN w_ck ELSE x.ck END AS expect
    FROM r2 LEFT JOIN src_ck x ON x.request = r2.request AND x.dst_agent = r2.agent AND x.dst_pool = r2.pool
        AND x.dst_layer = r2.layer AND x.dst_slot = r2.slot
)
SELECT 'checksum_mismatch' AS hazard, agent, request, pool, slot, shard, seq FROM pred
WHERE expect IS NOT NULL AND expect <> ck
