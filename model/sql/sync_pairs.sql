-- sync_pairs: cross-agent send → receive pairs, the happens-before edges between shards.
-- Notifications pair first-in-first-out per (sender agent, receiver agent, msg bytes):
-- the k-th notif_recv from P with msg m pairs with P's k-th xfer_post/notif_send to it
-- with msg m (a READ's notification goes to the agent whose memory was read = the post's
-- peer, so one rule covers push and pull); a posting that ended in error is no sender (a
-- retry re-posting the same tag gets the one notification). Control messages pair by detail.id.
-- requires: events, shards
-- Columns:
--   send_shard VARCHAR, send_sidx INTEGER, send_seq BIGINT  -- the sending event
--   send_kind  VARCHAR   -- xfer_post | notif_send | msg_send
--   send_xfer  BIGINT    -- the transfer a notification completes (xfer_post only)
--   recv_shard VARCHAR, recv_sidx INTEGER, recv_seq BIGINT  -- the receiving event
--   chan       VARCHAR   -- notif | msg
CREATE OR REPLACE TABLE sync_pairs AS
WITH failed AS (  -- postings that ended in error: NIXL sends their notification never
    SELECT DISTINCT shard, xfer FROM events WHERE kind = 'xfer_error'
), s AS (
    SELECT e.shard, e.seq, e.kind, e.xfer, e.agent AS src, e.peer AS dst, e.msg AS k, 'notif' AS chan
    FROM events e ANTI JOIN failed f ON f.shard = e.shard AND f.xfer = e.xfer
    WHERE e.kind IN ('xfer_post', 'notif_send') AND e.msg IS NOT NULL
    UNION ALL
    SELECT shard, seq, kind, NULL, agent, peer, encode(json_extract_string(detail, '$.id')), 'msg'
    FROM events WHERE kind = 'msg_send'
), r AS (
    SELECT shard, seq, peer AS src, agent AS dst, msg AS k, 'notif' AS chan
    FROM events WHERE kind = 'notif_recv'
    UNION ALL
    SELECT shard, seq, peer, agent, encode(json_extract_string(detail, '$.id')), 'msg'
    FROM events WHERE kind = 'msg_recv'
), sn AS (
    SELECT *, row_number() OVER (PARTITION BY chan, src, dst, k ORDER BY shard, seq) AS n FROM s
), rn AS (
    SELECT *, row_number() OVER (PARTITION BY chan, src, dst, k ORDER BY shard, seq) AS n FROM r
)
SELECT sn.shard AS send_shard, ss.sidx AS send_sidx, sn.seq AS send_seq, sn.kind AS send_kind,
       sn.xfer AS send_xfer, rn.shard AS recv_shard, rs.sidx AS recv_sidx, rn.seq AS recv_seq, sn.chan
FROM sn
JOIN rn ON sn.chan = rn.chan AND sn.src = rn.src AND sn.dst = rn.dst AND sn.k = rn.k AND sn.n = rn.n
JOIN shards ss ON ss.shard = sn.shard
JOIN shards rs ON rs.shard = rn.shard;
