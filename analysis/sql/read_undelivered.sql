-- check: read_undelivered
-- severity: error
-- needs: descs, slots, reads
-- summary: a consumer read a page that no transfer delivered and no local write produced
-- explain: For every read of a slot layer in an allocator-managed pool, something must have
--   filled it in the slot's current generation (since the alloc that took it from free):
--   a write event on that slot layer before the read, or a transfer posted by a holder of
--   this generation whose descriptors land on it (a descriptor spanning a run of slots
--   lands on each) and that is not posted after the read.
--   Prefix pages shared from an earlier turn count (their writer is in the generation).
--   Otherwise the read sees stale memory or poison. Decided only on a trace with no shard
--   cut short and no posting its recorder could not record: a transfer posted in a lost tail
--   can race the read, and its absence proves nothing (the unknowns name the cut).
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- consumer agent
--   request VARCHAR
--   pool VARCHAR       -- the affected pool (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER, slot BIGINT  -- first affected read
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first reads
--   count BIGINT       -- affected (read, slot) pairs
--   message VARCHAR
WITH j AS NOT MATERIALIZED (  -- with the latest local write before the read (precomputed in reads)
    SELECT r.* EXCLUDE (lw_seq, lw_ck, lw_req), r.lw_seq AS w_seq FROM reads r WHERE managed
), t AS (
    SELECT lk, gen_seq, bound FROM end_hold_ids   -- integer columns only: no name is read
    WHERE dst AND managed AND gen_seq IS NOT NULL
    UNION ALL   -- further slots of ends spanning a run of slots (grouped pages)
    SELECT lk, h.g AS gen_seq, bound FROM run_hold WHERE side = 'dst' AND h IS NOT NULL
), maybe AS (  -- transfers into the slot whose request's holding is unknown (unordered, or past a cut)
    SELECT lk, bound FROM end_hold_ids WHERE dst AND h_unknown
    UNION ALL
    SELECT lk, bound FROM run_hold WHERE side = 'dst' AND h_unknown
), bad AS (   -- anti joins: hash joins on the integer keys, no per-read subquery; on the read's
    -- keys alone ((lk, seq) is one read), so whichever side DuckDB hashes is narrow
    SELECT j.lk, j.seq FROM j
    ANTI JOIN t ON t.lk = j.lk AND t.gen_seq = j.gen_seq AND j.seq > t.bound
    -- one of them, not known to be posted after the read, may have delivered it: unknown
    ANTI JOIN maybe m ON m.lk = j.lk AND j.seq > m.bound
    WHERE NOT (j.w_seq IS NOT NULL AND (j.gen_seq IS NULL OR j.w_seq > j.gen_seq))
      -- absence of a delivery is a fact only where every posting is recorded: a post in a cut
      -- shard's lost tail may race the read (in the whole trace: read_before_done, not this),
      -- and a posting NIXL ran unrecorded (untraced) may have delivered it
      AND NOT EXISTS (SELECT 1 FROM shard_cut WHERE cut IS NOT NULL OR untraced > 0)
), undelivered AS (
    SELECT j.* FROM j SEMI JOIN bad USING (lk, seq)
    -- a read of a (pool, layer) its agent describes no layout for: no transfer's end can be
    -- mapped onto its slots (a layouts file lost, a pool or layer the hook leaves out), so
    -- the absence of a delivery proves nothing (coverage_read_undelivered counts it)
    WHERE EXISTS (SELECT 1 FROM lay l WHERE l.agent = j.agent AND l.pool = j.pool
                                        AND (l.layer = j.layer OR l.layer IS NULL))
)
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots, list(DISTINCT ev(shard, seq) ORDER BY ev(shard, seq))[1:4] AS events,
       count(*) AS count,
       format('{} read {} slot-layer(s) of pool(s) {} for request {} (slots {}, layers {}) that no transfer delivered and no write produced: the read sees stale or never-written memory.',
              agent, count(*), pool, request, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','),
              array_to_string(list(DISTINCT layer ORDER BY layer)[1:8], ',')) AS message
FROM undelivered GROUP BY agent, request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(seq);
