-- prog_order: program order, the one fact every reader orders a program's events by.
-- Per process (shard) events are ordered by seq; per thread (the trace's thread column,
-- null read as thread 0) by seq among that thread's events. Analysis happens-before
-- orders a process by proc_prev (seq order across its threads: the engine's locking is
-- not in the trace); replay runs each thread in its own order (thread_prev) and lets
-- the scheduler interleave threads, keeping proc order only between events that touch
-- the same cell (writes, reads, a post's local descriptor ends: replay/graph.py). It
-- covers every recorded event, also past a partial trace's cut (readers join the events
-- they have).
-- requires: recorded_events
-- on demand: replay and the timeline read it, no check does (saves ~1 s per 1M events)
-- Columns:
--   shard VARCHAR, seq BIGINT     -- the event
--   thread BIGINT                 -- its thread (0 when unrecorded)
--   tpos BIGINT                   -- 0-based position among its thread's events
--   thread_prev BIGINT            -- seq of the thread's previous event (null: first)
--   proc_prev BIGINT              -- seq of the process's previous event (null: first)
CREATE OR REPLACE TABLE prog_order AS
SELECT shard, seq, thread,
       (row_number() OVER (PARTITION BY shard, thread ORDER BY seq) - 1)::BIGINT AS tpos,
       lag(seq) OVER (PARTITION BY shard, thread ORDER BY seq) AS thread_prev,
       lag(seq) OVER (PARTITION BY shard ORDER BY seq) AS proc_prev
FROM (SELECT shard, seq, coalesce(thread, 0)::BIGINT AS thread FROM recorded_events);
