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
--   pool VARCHAR       -- the affected pool (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER, slot BIGINT  -- first affected read
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [disturbing event, the read]
--   count BIGINT       -- affected (read, slot) pairs
--   how VARCHAR        -- freed | reallocated | overwritten
--   message VARCHAR
-- Only a read whose slot saw something after R's alloc can be hit: R freed it, the
-- latest write of the layer is another request's, or the slot's next alloc (anyone's)
-- comes before the read. Those few candidates alone take the ASOF join to the
-- latest alloc; on a clean trace that is none, so no sort of every read. The allocs come
-- from slot_life_ids (its alloc rows are slot_ev's; integers, not the slot_life view's names),
-- not slot_ev: the view re-reads and unnests the events (10M events under a 300 MB cap: 3.1 -> 2.5 cpu-s)
WITH nxt AS (   -- each alloc of a slot with the slot's next alloc (by any request)
    SELECT sk, seq AS a_seq, lead(seq) OVER (PARTITION BY sk ORDER BY seq) AS next_a
    FROM (SELECT DISTINCT sk, seq FROM slot_life_ids WHERE alloc)
), cand AS (
    SELECT r.shard, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, r.sk, r.lk, r.alloc_seq, r.free_seq,
           r.lw_seq AS w_seq, r.lw_req AS w_req  -- latest local write before the read (precomputed in reads)
    FROM reads r JOIN nxt n ON n.sk = r.sk AND n.a_seq = r.alloc_seq
    WHERE (r.free_seq IS NOT NULL AND r.free_seq < r.seq) OR n.next_a < r.seq
       OR (r.lw_seq > r.alloc_seq AND r.lw_req <> r.request)
), r AS (   -- read slots one of R's transfers delivered into, within R's holding (the
            -- holding's alloc identifies R: one alloc event, one request)
    SELECT * FROM cand c
    WHERE EXISTS (SELECT 1 FROM end_hold e WHERE e.side = 'dst' AND e.managed AND e.lk = c.lk AND e.alloc_seq = c.alloc_seq)
), la AS (SELECT sk, seq AS a_seq, request AS a_req, shared FROM slot_life_ids WHERE alloc),
j AS (
    SELECT r.*, la.a_seq, la.a_req, la.shared
    FROM r ASOF LEFT JOIN (SELECT * FROM la WHERE sk IN (SELECT sk FROM r)) la ON la.sk = r.sk AND r.seq > la.a_seq
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
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(any_value(shard), min(d_seq)), ev(any_value(shard), min(seq))] AS events,
       count(*) AS count, how,
       format('{} read slot(s) {} of pool(s) {} for request {} after the slot was {} ({}) — the read sees bytes that are no longer this request''s.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request, how,
              CASE how WHEN 'freed' THEN 'the request freed it first'
                       -- every request its slots went to (several slots may go to several)
                       WHEN 'reallocated' THEN 'handed to ' || array_to_string(list(DISTINCT a_req ORDER BY a_req)[1:4], ', ')
                       ELSE 'written by ' || array_to_string(list(DISTINCT w_req ORDER BY w_req)[1:4], ', ') END) AS message
FROM bad GROUP BY agent, request, how, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(seq);
