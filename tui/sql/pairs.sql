-- pairs: every receive joined to the send it pairs with (the cross-shard happens-before
-- edges the timeline order must respect).
--   notif_recv  pairs first-in-first-out with the xfer_post / notif_send of `peer` to this
--               agent carrying the same `msg` (k-th receive <-> k-th send);
--   msg_recv    pairs with the msg_send carrying the same detail.id.
-- Columns:
--   shard, seq            the receive
--   send_shard, send_seq  the send it pairs with
--   send_xfer             the transfer id of that send when it is an xfer_post (else null)
WITH sends AS (
    SELECT shard, seq, xfer, agent AS src, peer AS dst, msg,
           row_number() OVER (PARTITION BY agent, peer, msg ORDER BY shard, seq) AS k
    FROM events
    WHERE kind IN ('xfer_post', 'notif_send') AND msg IS NOT NULL
), recvs AS (
    SELECT shard, seq, peer AS src, agent AS dst, msg,
           row_number() OVER (PARTITION BY peer, agent, msg ORDER BY shard, seq) AS k
    FROM events
    WHERE kind = 'notif_recv' AND msg IS NOT NULL
), msg_sends AS (
    SELECT shard, seq, json_extract_string(detail, '$.id') AS mid
    FROM events WHERE kind = 'msg_send' AND detail IS NOT NULL
), msg_recvs AS (
    SELECT shard, seq, json_extract_string(detail, '$.id') AS mid
    FROM events WHERE kind = 'msg_recv' AND detail IS NOT NULL
)
SELECT r.shard, r.seq, s.shard AS send_shard, s.seq AS send_seq, s.xfer AS send_xfer
FROM recvs r JOIN sends s ON r.src = s.src AND r.dst = s.dst AND r.msg = s.msg AND r.k = s.k
UNION ALL
SELECT r.shard, r.seq, min(s.shard) AS send_shard, min(s.seq) AS send_seq, NULL::BIGINT AS send_xfer
FROM msg_recvs r JOIN msg_sends s ON r.mid = s.mid
GROUP BY r.shard, r.seq
