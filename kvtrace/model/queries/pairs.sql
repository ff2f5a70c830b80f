-- pairs: every send → receive pair (sync_pairs), receives in (shard, seq) order.
-- Columns: send_shard VARCHAR, send_seq BIGINT, send_kind VARCHAR, send_xfer BIGINT,
--   recv_shard VARCHAR, recv_seq BIGINT, chan VARCHAR (notif | msg)
SELECT send_shard, send_seq, send_kind, send_xfer, recv_shard, recv_seq, chan
FROM sync_pairs ORDER BY recv_shard, recv_seq
