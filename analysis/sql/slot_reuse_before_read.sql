-- check: slot_reuse_before_read
-- severity: error
-- needs: descs, layouts, slots, reads
-- summary: a delivered slot was freed, re-allocated or overwritten on the consumer before the owning request read it
-- explain: For every read by request R of a slot that one of R's transfers delivered into
--   (within R's current holding of the slot), look at what happened to the slot on the
--   consumer between R's alloc and the read: R freed it, another request allocated it
--   (not as a shared prefix reference), or another request wrote that layer of it. Any of
--   these means R reads bytes that are no longer its own. Reusing the slot right after the
--   read, and R appending to its own partly filled last page, are legal.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- consumer agent
--   request VARCHAR    -- the reader
--   pool VARCHAR       -- first affected pool (pools: all of them)
--   pools VARCHAR[]
--   layer INTEGER, slot BIGINT  -- first affected read
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [disturbing event, the read]
--   count BIGINT       -- affected (read, slot) pairs
--   how VARCHAR        -- freed | reallocated | overwritten
--   message VARCHAR
WITH delivered AS (
    SELECT DISTINCT lk, request, alloc_seq
    FROM end_hold WHERE side = 'dst' AND managed AND alloc_seq IS NOT NULL
), r AS (
    SELECT r.* EXCLUDE (lw_seq, lw_ck, lw_req), r.lw_seq AS w_seq, r.lw_req AS w_req  -- latest local write before the read (precomputed in reads)
    FROM reads r SEMI JOIN delivered d USING (lk, request, alloc_seq)
), la AS (SELECT sk, seq AS a_seq, request AS a_req, shared FROM slot_ev WHERE kind = 'alloc'),
j AS (
    SELECT r.*, la.a_seq, la.a_req, la.shared
    FROM r ASOF LEFT JOIN la ON la.sk = r.sk AND r.seq > la.a_seq
), bad AS (
    SELECT *, CASE WHEN free_seq IS NOT NULL AND free_seq < seq THEN 'freed'
                   WHEN a_seq > alloc_seq AND a_req <> request AND NOT shared THEN 'reallocated'
                   ELSE 'overwritten' END AS how,
              CASE WHEN free_seq IS NOT NULL AND free_seq < seq THEN free_seq
                   WHEN a_seq > alloc_seq AND a_req <> request AND NOT shared THEN a_seq
                   ELSE w_seq END AS d_seq
    FROM j
    WHERE (free_seq IS NOT NULL AND free_seq < seq)
       OR (a_seq > alloc_seq AND a_req <> request AND NOT shared)
       OR (w_seq > alloc_seq AND w_req <> request)
)
SELECT 'error' AS severity, agent, request, min(pool) AS pool, list(DISTINCT pool ORDER BY pool) AS pools, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(any_value(shard), min(d_seq)), ev(any_value(shard), min(seq))] AS events,
       count(*) AS count, how,
       format('{} read slot(s) {} of pool(s) {} for request {} after the slot was {} ({}) — the read sees bytes that are no longer this request''s.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), array_to_string(list(DISTINCT pool ORDER BY pool), '+'), request, how,
              CASE how WHEN 'freed' THEN 'the request freed it first'
                       WHEN 'reallocated' THEN 'handed to ' || arg_min(a_req, seq)
                       ELSE 'written by ' || arg_min(w_req, seq) END) AS message
FROM bad GROUP BY agent, request, how
ORDER BY min(seq);
