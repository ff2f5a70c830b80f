-- events_in_order: (shard, seq, t_ns) of every event, each shard in program order.
-- Columns: shard VARCHAR, seq BIGINT, t_ns BIGINT
SELECT shard, seq, t_ns FROM events ORDER BY shard, seq
