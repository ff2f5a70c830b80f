-- fact: transfers
-- counts: transfers posted in the trace
-- absent: the trace has no posted transfers
-- requires: xfers
SELECT count(*) AS n FROM xfers
