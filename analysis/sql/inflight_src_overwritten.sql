-- check: inflight_src_overwritten
-- severity: error
-- needs: descs
-- summary: another transfer, a deregister or the producer's own write touched bytes an in-flight transfer is reading or writing
-- explain: Works on bytes alone (no layouts needed). A transfer writing into bytes that a
--   concurrent transfer reads as its source (neither is known to have ended before the
--   other was posted), or a deregister of memory a transfer touches while that transfer
--   is not known to have ended, corrupts or invalidates the in-flight copy. With layouts
--   and write events, so does a write by the transfer's own request to a source slot
--   layer that was already written before the post, after the post and before the
--   transfer is known to have ended there (chunked prefill refilling a partly filled last
--   page that the previous chunk is still sending); a post before any write is
--   post_before_write, and other requests' writes need the slot freed first
--   (src_free_before_done). One finding per agent, request, intruder, kind and pool
--   (bytes outside every layout: one finding with no pool).
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- whose memory
--   request VARCHAR    -- the in-flight transfer's request
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- layout position if known (first layer, first slot of the pool)
--   slots BIGINT[]     -- every affected slot of the pool
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [in-flight post, intruding post or deregister]
--   count BIGINT       -- overlapping descriptor pairs
--   intruder VARCHAR   -- the intruder: a request key or 'deregister'
--   how VARCHAR        -- transfer | deregister | write
--   message VARCHAR
WITH xp AS (  -- one end reads (src), the other writes (dst)
    SELECT agent, CASE WHEN a_side = 'src' THEN a_request ELSE b_request END AS request,
           CASE WHEN a_side = 'src' THEN b_request ELSE a_request END AS intruder,
           CASE WHEN a_side = 'src' THEN a_shard ELSE b_shard END AS v_shard,
           CASE WHEN a_side = 'src' THEN a_post ELSE b_post END AS v_post, 'src' AS v_side,
           CASE WHEN a_side = 'src' THEN b_shard ELSE a_shard END AS i_shard,
           CASE WHEN a_side = 'src' THEN b_post ELSE a_post END AS i_post, pool, layer, slot, 'transfer' AS how
    FROM inflight_pairs WHERE a_side <> b_side
), dr AS (
    SELECT e.shard, s.sidx, e.seq, e.agent, e.addr, e.nbytes FROM events e JOIN shards s USING (shard)
    WHERE e.kind = 'deregister'
), dp AS (
    SELECT e.agent, e.request, 'deregister' AS intruder, e.shard AS v_shard, e.post_seq AS v_post, e.side AS v_side,
           d.shard AS i_shard, d.seq AS i_post, e.pool, e.layer, e.slot, 'deregister' AS how
    FROM end_hold e JOIN dr d ON d.agent = e.agent AND d.addr < e.addr + e.nbytes AND e.addr < d.addr + d.nbytes
    LEFT JOIN xfer_seen s ON s.shard = e.shard AND s.xfer = e.xfer AND s.side_sidx = d.sidx
    WHERE NOT coalesce(s.end_seq <= d.seq, false) AND NOT (d.sidx = e.h_sidx AND d.seq <= e.bound)
), wp0 AS (  -- the transfer's own request writes a source slot layer after the post, before
             -- the transfer is known to have ended on that shard
    SELECT e.agent, e.request, e.shard, e.post_seq, e.side, w.shard AS w_shard, w.seq AS w_seq,
           e.pool, e.layer, e.slot, e.lk, e.bound, e.gen_seq
    FROM end_hold e JOIN writes w ON w.lk = e.lk AND w.request = e.request
    WHERE e.side = 'src' AND w.seq > e.bound AND (e.end_seq IS NULL OR w.seq < e.end_seq)
), wp AS (  -- ... over a source already written before the post (else: post_before_write's)
    SELECT agent, request, request AS intruder, shard AS v_shard, post_seq AS v_post, side AS v_side,
           w_shard AS i_shard, w_seq AS i_post, pool, layer, slot, 'write' AS how
    FROM wp0
    WHERE EXISTS (SELECT 1 FROM writes b WHERE b.lk = wp0.lk AND b.seq <= wp0.bound
                                         AND (wp0.gen_seq IS NULL OR b.seq >= wp0.gen_seq))
), allp AS (SELECT * FROM xp UNION ALL SELECT * FROM dp UNION ALL SELECT * FROM wp)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
       [ev(arg_min(v_shard, v_post), min(v_post)), ev(arg_min(i_shard, v_post), arg_min(i_post, v_post))] AS events,
       count(*) AS count, intruder, how,
       format('{} of {}''s memory that an in-flight transfer of request {} was {} were {} while it was in flight ({} overlapping descriptor pairs{}).',
              CASE WHEN min(slot) IS NULL THEN 'Bytes' ELSE format('Slot(s) {} of pool {}', array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool) END,
              agent, request, CASE WHEN bool_and(v_side = 'src') THEN 'reading' WHEN bool_and(v_side = 'dst') THEN 'writing' ELSE 'reading or writing' END,
              CASE how WHEN 'deregister' THEN 'deregistered' WHEN 'write' THEN 'rewritten by the request''s own write'
                       ELSE 'overwritten by a transfer of request ' || intruder END,
              count(*), '') AS message
FROM allp GROUP BY agent, request, intruder, how, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(v_post);
