-- export_msg_flows: control messages, msg_send paired with msg_recv by detail.id.
-- Columns:
--   src_shard, src_seq   the msg_send event
--   dst_shard, dst_seq   the msg_recv event with the same id (on the send's peer, if named)
WITH s AS (
    SELECT shard, seq, agent, peer, json_extract_string(detail, '$.id') AS mid
    FROM events WHERE kind = 'msg_send'
), r AS (
    SELECT shard, seq, agent, peer, json_extract_string(detail, '$.id') AS mid
    FROM events WHERE kind = 'msg_recv'
)
SELECT s.shard AS src_shard, s.seq AS src_seq, r.shard AS dst_shard, r.seq AS dst_seq
FROM s JOIN r ON r.mid = s.mid AND (s.peer IS NULL OR r.agent = s.peer)
WHERE s.mid IS NOT NULL
