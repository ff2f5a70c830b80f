-- export_msg_flows: control messages, each msg_send with the msg_recv it pairs with: the
-- trace model's pairs (sync_pairs, chan 'msg': by detail.id, agent names disambiguating).
-- Columns:
--   src_shard, src_seq   the msg_send event
--   dst_shard, dst_seq   the msg_recv event
SELECT send_shard AS src_shard, send_seq AS src_seq, recv_shard AS dst_shard, recv_seq AS dst_seq
FROM sync_pairs WHERE chan = 'msg'
