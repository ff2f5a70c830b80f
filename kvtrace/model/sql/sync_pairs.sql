-- sync_pairs: cross-agent send → receive pairs, the happens-before edges between shards.
-- Notifications pair first-in-first-out per (sender agent, receiver agent, msg bytes):
-- the k-th notif_recv from P with msg m pairs with P's k-th xfer_post/notif_send to it
-- with msg m (a READ's notification goes to the agent whose memory was read = the post's
-- peer, so one rule covers push and pull); a posting that ended in error is no sender (a
-- retry re-posting the same tag gets the one notification).
-- Control messages pair by detail.id, as the format says; the agent names, when both ends
-- record them, only disambiguate: ends with the same (id, sender, receiver) pair first in
-- first out, then ends still unpaired pair first in first out by id alone (a sender that
-- names its peer differently from how the peer names itself still pairs).
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
), ns AS (
    SELECT e.shard, e.seq, e.kind, e.xfer, e.agent AS src, e.peer AS dst, e.msg AS k
    FROM events e ANTI JOIN failed f ON f.shard = e.shard AND f.xfer = e.xfer
    WHERE e.kind IN ('xfer_post', 'notif_send') AND e.msg IS NOT NULL
), nr AS (
    SELECT shard, seq, peer AS src, agent AS dst, msg AS k FROM events WHERE kind = 'notif_recv'
), notif AS (
    SELECT s.shard AS send_shard, s.seq AS send_seq, s.kind AS send_kind, s.xfer AS send_xfer,
           r.shard AS recv_shard, r.seq AS recv_seq, 'notif' AS chan
    FROM (SELECT *, row_number() OVER (PARTITION BY src, dst, k ORDER BY shard, seq) AS n FROM ns) s
    JOIN (SELECT *, row_number() OVER (PARTITION BY src, dst, k ORDER BY shard, seq) AS n FROM nr) r
      ON s.src = r.src AND s.dst = r.dst AND s.k = r.k AND s.n = r.n
), ms AS (
    SELECT shard, seq, agent AS src, peer AS dst, json_extract_string(detail, '$.id') AS id
    FROM events WHERE kind = 'msg_send'
), mr AS (
    SELECT shard, seq, peer AS src, agent AS dst, json_extract_string(detail, '$.id') AS id
    FROM events WHERE kind = 'msg_recv'
), named AS (  -- same id, same sender and receiver: first in first out
    SELECT s.shard AS send_shard, s.seq AS send_seq, r.shard AS recv_shard, r.seq AS recv_seq
    FROM (SELECT *, row_number() OVER (PARTITION BY id, src, dst ORDER BY shard, seq) AS n
          FROM ms WHERE id IS NOT NULL AND src IS NOT NULL AND dst IS NOT NULL) s
    JOIN (SELECT *, row_number() OVER (PARTITION BY id, src, dst ORDER BY shard, seq) AS n
          FROM mr WHERE id IS NOT NULL AND src IS NOT NULL AND dst IS NOT NULL) r
      ON s.id = r.id AND s.src = r.src AND s.dst = r.dst AND s.n = r.n
), by_id AS (  -- the rest: same id, first in first out
    SELECT s.shard AS send_shard, s.seq AS send_seq, r.shard AS recv_shard, r.seq AS recv_seq
    FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY shard, seq) AS n FROM ms
          WHERE id IS NOT NULL AND (shard, seq) NOT IN (SELECT (send_shard, send_seq) FROM named)) s
    JOIN (SELECT *, row_number() OVER (PARTITION BY id ORDER BY shard, seq) AS n FROM mr
          WHERE id IS NOT NULL AND (shard, seq) NOT IN (SELECT (recv_shard, recv_seq) FROM named)) r
      ON s.id = r.id AND s.n = r.n
), p AS (
    SELECT * FROM notif
    UNION ALL
    SELECT send_shard, send_seq, 'msg_send', NULL::BIGINT, recv_shard, recv_seq, 'msg' FROM named
    UNION ALL
    SELECT send_shard, send_seq, 'msg_send', NULL::BIGINT, recv_shard, recv_seq, 'msg' FROM by_id
)
SELECT p.send_shard, ss.sidx AS send_sidx, p.send_seq, p.send_kind, p.send_xfer,
       p.recv_shard, rs.sidx AS recv_sidx, p.recv_seq, p.chan
FROM p
JOIN shards ss ON ss.shard = p.send_shard
JOIN shards rs ON rs.shard = p.recv_shard;
