-- check: read_before_done
-- severity: error
-- needs: descs, layouts, slots, reads
-- summary: a consumer read a slot targeted by a transfer of its request with no completion observation happening-before the read
-- explain: For every read by request R of a slot layer that R's transfers (posted within
--   R's current holding, not after the read) write, the bytes each of those transfers
--   delivers into the slot must be covered by a transfer observed complete before the
--   read: its notification on the consumer, the initiator's xfer_done (READ mode), or
--   anything that happens after either. A retry whose range covers a failed attempt's
--   counts for it; parts of a slot filled by different transfers (heterogeneous TP: one
--   half per remote rank) each need their own. Every slot of a descriptor spanning a run of slots
--   (grouped pages) counts as delivered by it. A read
--   after the notification but before the initiator's next poll records DONE is legal.
--   A read with no observation sees whatever bytes happened to land (nixl #252: a
--   completion signal that precedes the data looks the same).
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- consumer agent
--   request VARCHAR
--   pool VARCHAR       -- the affected pool (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER, slot BIGINT  -- first affected read
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [post, read]
--   count BIGINT       -- affected (read, slot) pairs
--   message VARCHAR
WITH run_t AS (  -- further slots of destination ends spanning a run of slots (grouped pages)
    SELECT lk, request, h.a AS alloc_seq, shard AS x_shard, xfer, post_seq, bound, seen_seq, 0::BIGINT AS lo,
           least(off + nbytes - (slot - s0) * slot_bytes, slot_bytes) AS hi
    FROM run_hold WHERE side = 'dst'
), t AS NOT MATERIALIZED (  -- inlined: cand reads only its integer columns
    SELECT lk, request, alloc_seq, shard AS x_shard, xfer, post_seq, bound, seen_seq,
           off AS lo, least(off + nbytes, slot_bytes) AS hi   -- the bytes it delivers into this slot
    FROM end_hold WHERE side = 'dst' AND managed AND alloc_seq IS NOT NULL
    UNION ALL
    SELECT * FROM run_t WHERE alloc_seq IS NOT NULL
), cand AS (  -- reads with a delivering transfer not observed before them: only these can be hit
    -- (one hash join on integer keys; the holding's alloc identifies the request)
    SELECT DISTINCT r.sidx, r.seq, r.lk
    FROM reads r JOIN t USING (lk, alloc_seq)
    WHERE NOT r.seq <= t.bound AND NOT coalesce(t.seen_seq <= r.seq, false)
), rg AS MATERIALIZED (  -- per read slot layer and delivered byte range: is a transfer of it observed
    SELECT r.shard, r.sidx, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, t.lo, t.hi,
           -- the first post and its own shard (replicas from several ranks share a range)
           min(t.post_seq) AS post_seq, arg_min(t.x_shard, t.post_seq) AS x_shard,
           bool_or(coalesce(t.seen_seq <= r.seq, false)) AS obs
    FROM reads r SEMI JOIN cand USING (sidx, seq, lk) JOIN t USING (lk, request, alloc_seq)
    WHERE NOT r.seq <= t.bound      -- transfers posted after the read are not this read's data
    GROUP BY ALL
), j AS (  -- not observed: a range that no observed transfer's range covers
    SELECT o.* FROM rg o
    WHERE NOT o.obs AND NOT EXISTS (SELECT 1 FROM rg c WHERE c.obs AND c.shard = o.shard AND c.seq = o.seq
                                    AND c.layer = o.layer AND c.slot = o.slot AND c.lo <= o.lo AND c.hi >= o.hi)
)
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(x_shard, seq), arg_min(post_seq, seq)), ev(any_value(shard), min(seq))] AS events,
       count(*) AS count,
       format('{} read slot(s) {} of pool(s) {} for request {} before the completion of every transfer delivering their bytes was observed (no notification or done of it happens-before the read): it may see bytes that have not landed yet.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request) AS message
FROM j GROUP BY agent, request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(seq);
