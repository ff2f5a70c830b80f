-- naive src_free_before_done: a transfer's source slot freed by its request after the
-- post and before the transfer's xfer_done on the posting shard (or with no done at all).
WITH post AS (
    SELECT shard, xfer, seq AS post_seq, request FROM events WHERE kind = 'xfer_post'
), done AS (
    SELECT shard, xfer, min(seq) AS done_seq FROM events WHERE kind IN ('xfer_done', 'xfer_error') GROUP BY ALL
), src AS (  -- every descriptor's source slot through the agent's layout
    SELECT DISTINCT d.shard, d.xfer, d.src_agent AS agent, l.pool, (d.src_addr - l.addr) // l.slot_bytes AS slot
    FROM descs d JOIN layouts l ON l.agent = d.src_agent AND d.src_addr >= l.addr AND d.src_addr < l.addr + l.nbytes
), fr AS (
    SELECT shard, seq, agent, pool, request, unnest(slots) AS slot FROM events WHERE kind = 'free'
)
SELECT DISTINCT 'src_free_before_done' AS hazard, s.agent, p.request, s.pool, s.slot, p.shard, p.xfer
FROM src s JOIN post p USING (shard, xfer)
LEFT JOIN done d USING (shard, xfer)
JOIN fr f ON f.shard = s.shard AND f.agent = s.agent AND f.pool = s.pool AND f.slot = s.slot
         AND f.request = p.request AND f.seq > p.post_seq
WHERE d.done_seq IS NULL OR f.seq < d.done_seq
