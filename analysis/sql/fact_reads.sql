-- fact: reads
-- counts: read events (a consumer used slots)
-- absent: the trace has no read events
-- requires: events
SELECT count(*) AS n FROM events WHERE kind = 'read'
