-- check: post_before_write
-- severity: error
-- needs: descs, layouts, slots, writes
-- summary: a transfer was posted before the producer's write of its source happened-before it
-- explain: For every descriptor source slot layer in an allocator-managed pool where the
--   producer records writes, some write of that slot layer in the slot's current
--   generation must happen-before the post (a shared prefix page written by an earlier
--   turn counts; a shared alloc — a prefix-cache hit on a page the cache kept after its
--   last request freed it — continues the generation before it: see view holdings).
--   Otherwise the transfer can copy the bytes before the kernel wrote them —
--   an unsynchronized stream. The finding says whether the write came later or never.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- producer (source) agent
--   request VARCHAR    -- the transfer's request
--   pool VARCHAR       -- the affected pool (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER, slot BIGINT  -- first affected source
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [post, the late write if any]
--   count BIGINT       -- affected descriptor sources
--   late BIGINT        -- of them, written only after (not before) the post
--   message VARCHAR
-- The ASOF join to the latest write before the post carries integer keys only, and only for
-- the sources no write of their own request settles; whether the producer records writes in
-- the pool (a string key), the payload and the first write after the post are looked up for
-- the bad sources alone.
WITH s0 AS (
    SELECT psidx, xfer, pos, lk, bound, gen_seq, request FROM end_hold
    WHERE side = 'src' AND managed AND alloc_seq IS NOT NULL
), s AS (   -- a write by the transfer's own request in the generation, before the post, settles it
            -- (one hash join: the usual case); only the others need the latest write before the post
    SELECT * FROM s0
    ANTI JOIN writes w ON w.lk = s0.lk AND w.request = s0.request AND w.seq >= s0.gen_seq AND w.seq <= s0.bound
), lw AS (SELECT lk, seq AS w_seq FROM writes),
b AS (
    SELECT s.psidx, s.xfer, s.pos, s.lk, s.bound
    FROM s ASOF LEFT JOIN (SELECT * FROM lw WHERE lk IN (SELECT lk FROM s)) b ON b.lk = s.lk AND s.bound >= b.w_seq
    WHERE b.w_seq IS NULL OR b.w_seq < s.gen_seq
), wp AS (SELECT DISTINCT shard, agent, pool FROM writes),
be AS MATERIALIZED (   -- their full rows (materialized: the string-keyed test below runs on these alone)
    SELECT e.*, b.lk AS b_lk, b.bound AS b_bound FROM b JOIN end_hold e ON e.side = 'src' AND e.psidx = b.psidx AND e.xfer = b.xfer AND e.pos = b.pos
), bad AS (
    SELECT e.*, a.w_seq AS after_seq
    FROM be e SEMI JOIN wp ON wp.shard = e.h_shard AND wp.agent = e.agent AND wp.pool = e.pool
    -- only the writes of those slot layers are sorted for it (none on a clean trace)
    ASOF LEFT JOIN (SELECT * FROM lw WHERE lk IN (SELECT lk FROM b)) a ON a.lk = e.b_lk AND e.b_bound < a.w_seq
)
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(shard, post_seq), min(post_seq)), ev(any_value(h_shard), min(after_seq))] AS events,
       count(*) AS count, count(after_seq) AS late,
       format('{} transfer(s) of request {} were posted before {}''s write of source slot(s) {} of pool(s) {} happened-before the post ({} of {} written only afterwards): the transfer can copy bytes the producer has not written yet.',
              count(DISTINCT (shard, xfer)), request, agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','),
              pool, count(after_seq), count(*)) AS message
FROM bad GROUP BY agent, request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(post_seq);
