-- check: inflight_src_overwritten
-- severity: error
-- needs: descs
-- summary: another transfer or a deregister touched bytes an in-flight transfer is reading or writing
-- explain: Works on bytes alone (no layouts needed). A transfer writing into bytes that a
--   concurrent transfer reads as its source (neither is known to have ended before the
--   other was posted), or a deregister of memory a transfer touches while that transfer
--   is not known to have ended, corrupts or invalidates the in-flight copy.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- whose memory
--   request VARCHAR    -- the in-flight transfer's request
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- layout position if known
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [in-flight post, intruding post or deregister]
--   count BIGINT       -- overlapping descriptor pairs
--   intruder VARCHAR   -- the intruder: a request key or 'deregister'
--   message VARCHAR
WITH xp AS (  -- one end reads (src), the other writes (dst)
    SELECT agent, CASE WHEN a_side = 'src' THEN a_request ELSE b_request END AS request,
           CASE WHEN a_side = 'src' THEN b_request ELSE a_request END AS intruder,
           CASE WHEN a_side = 'src' THEN a_shard ELSE b_shard END AS v_shard,
           CASE WHEN a_side = 'src' THEN a_post ELSE b_post END AS v_post, 'src' AS v_side,
           CASE WHEN a_side = 'src' THEN b_shard ELSE a_shard END AS i_shard,
           CASE WHEN a_side = 'src' THEN b_post ELSE a_post END AS i_post, pool, layer, slot
    FROM inflight_pairs WHERE a_side <> b_side
), dr AS (
    SELECT e.shard, s.sidx, e.seq, e.agent, e.addr, e.nbytes FROM events e JOIN shards s USING (shard)
    WHERE e.kind = 'deregister'
), dp AS (
    SELECT e.agent, e.request, 'deregister' AS intruder, e.shard AS v_shard, e.post_seq AS v_post, e.side AS v_side,
           d.shard AS i_shard, d.seq AS i_post, e.pool, e.layer, e.slot
    FROM end_hold e JOIN dr d ON d.agent = e.agent AND d.addr < e.addr + e.nbytes AND e.addr < d.addr + d.nbytes
    LEFT JOIN xfer_seen s ON s.shard = e.shard AND s.xfer = e.xfer AND s.side_sidx = d.sidx
    WHERE NOT coalesce(s.end_seq <= d.seq, false) AND NOT (d.sidx = e.h_sidx AND d.seq <= e.bound)
), allp AS (SELECT * FROM xp UNION ALL SELECT * FROM dp)
SELECT 'error' AS severity, agent, request, min(pool) AS pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
       [ev(arg_min(v_shard, v_post), min(v_post)), ev(arg_min(i_shard, v_post), arg_min(i_post, v_post))] AS events,
       count(*) AS count, intruder,
       format('{} of {}''s memory that an in-flight transfer of request {} was {} were {} while it was in flight ({} overlapping descriptor pairs{}).',
              CASE WHEN min(slot) IS NULL THEN 'Bytes' ELSE format('Slot(s) {} of pool {}', array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), min(pool)) END,
              agent, request, CASE WHEN bool_and(v_side = 'src') THEN 'reading' WHEN bool_and(v_side = 'dst') THEN 'writing' ELSE 'reading or writing' END,
              CASE WHEN intruder = 'deregister' THEN 'deregistered' ELSE 'overwritten by a transfer of request ' || intruder END,
              count(*), '') AS message
FROM allp GROUP BY agent, request, intruder
ORDER BY min(v_post);
