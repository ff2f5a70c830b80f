-- export_notif_flows: which sent notification each notif_recv delivered: the trace model's
-- pairs (sync_pairs, chan 'notif'; see kvtrace/model/sql/sync_pairs.sql for the rule).
-- Columns:
--   src_shard, src_seq   the xfer_post or notif_send event
--   dst_shard, dst_seq   the notif_recv event that delivered it
SELECT send_shard AS src_shard, send_seq AS src_seq, recv_shard AS dst_shard, recv_seq AS dst_seq
FROM sync_pairs WHERE chan = 'notif'
