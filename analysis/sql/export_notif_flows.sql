-- export_notif_flows: which sent notification each notif_recv delivered.
-- A notif_recv has no xfer: it pairs first-in-first-out with the posts (and plain
-- notif_send calls) of its `peer` towards it that carry the same `msg` (DESIGN.md).
-- Columns:
--   src_shard, src_seq   the xfer_post or notif_send event
--   dst_shard, dst_seq   the notif_recv event that delivered it
WITH sends AS (
    SELECT shard, seq, agent AS sender, peer AS receiver, msg,
           row_number() OVER (PARTITION BY agent, peer, msg ORDER BY shard, seq) AS k
    FROM events
    WHERE kind IN ('xfer_post', 'notif_send') AND msg IS NOT NULL AND peer IS NOT NULL
), recvs AS (
    SELECT shard, seq, peer AS sender, agent AS receiver, msg,
           row_number() OVER (PARTITION BY peer, agent, msg ORDER BY shard, seq) AS k
    FROM events
    WHERE kind = 'notif_recv' AND msg IS NOT NULL
)
SELECT s.shard AS src_shard, s.seq AS src_seq, r.shard AS dst_shard, r.seq AS dst_seq
FROM sends s
JOIN recvs r ON r.sender = s.sender AND r.receiver = s.receiver AND r.msg = s.msg AND r.k = s.k
