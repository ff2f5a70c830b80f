-- export_requests: each request's lifetime on each agent, from req_start to its first
-- req_done / req_abort after it (null end: still running when the trace ends).
-- Columns:
--   shard, agent, request
--   start_seq, t_start   the req_start event
--   end_seq, t_end       the req_done / req_abort event (null when none)
--   outcome              done | abort | open
WITH s AS (
    SELECT shard, agent, request, seq, t_ns FROM events WHERE kind = 'req_start'
), e AS (
    SELECT shard, agent, request, seq, t_ns, kind FROM events WHERE kind IN ('req_done', 'req_abort')
), m AS (
    SELECT s.shard, s.agent, s.request, s.seq AS start_seq, s.t_ns AS t_start,
           e.seq AS end_seq, e.t_ns AS t_end, e.kind AS end_kind,
           row_number() OVER (PARTITION BY s.shard, s.seq ORDER BY e.seq) AS rn
    FROM s LEFT JOIN e ON e.shard = s.shard AND e.agent IS NOT DISTINCT FROM s.agent
                      AND e.request = s.request AND e.seq > s.seq
)
SELECT shard, agent, request, start_seq, t_start, end_seq, t_end,
       CASE end_kind WHEN 'req_done' THEN 'done' WHEN 'req_abort' THEN 'abort' ELSE 'open' END AS outcome
FROM m WHERE rn = 1
ORDER BY shard, start_seq
