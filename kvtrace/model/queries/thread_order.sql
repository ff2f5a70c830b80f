-- thread_order: every thread's events in program order (prog_order), threads listed by
-- shard, then by their first event.
-- Columns: shard VARCHAR, thread BIGINT, seqs BIGINT[] (in tpos order)
SELECT shard, thread, list(seq ORDER BY tpos) AS seqs
FROM prog_order GROUP BY shard, thread ORDER BY shard, min(seq)
