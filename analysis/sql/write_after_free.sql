-- check: write_after_free
-- severity: error
-- needs: descs, layouts, slots
-- summary: a destination slot was freed (abort, timeout) while a transfer into it was not observed complete
-- explain: For every descriptor destination slot, take the holding of the transfer's
--   request that covers the post and the first free that returns the slot to the
--   allocator. If neither the target's notification nor a done/error of the transfer
--   happens-before that free (a free before the post included), the transfer's late bytes can land in the slot's next
--   owner (sglang #24527; fixed upstream by deferring the release, #35049). An abort
--   after the completion was observed is legal and not flagged.
--   A descriptor spanning a run of slots (grouped contiguous pages) is checked for every
--   slot of the run.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- the destination agent (whose slot was freed)
--   request VARCHAR    -- the transfer's request
--   pool VARCHAR       -- the affected pool (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER, slot BIGINT  -- first affected slot
--   slots BIGINT[]     -- every affected slot
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [post, premature free]
--   count BIGINT       -- affected (transfer, layer, slot) descriptors
--   xfers BIGINT       -- transfers affected
--   message VARCHAR
WITH run_h AS (  -- further slots of ends spanning a run of slots (grouped pages)
    SELECT * FROM run_hold WHERE side = 'dst'
), bad AS (
    SELECT shard, xfer, agent, pool, layer, slot, request, post_seq, h_shard, release_seq FROM end_hold e
    WHERE e.managed AND e.alloc_seq IS NOT NULL AND e.side = 'dst' AND e.release_seq IS NOT NULL
      AND (e.end_seq IS NULL OR e.release_seq < e.end_seq)
    UNION ALL
    SELECT shard, xfer, agent, pool, layer, slot, request, post_seq, h_shard, h.r FROM run_h
    WHERE h.r IS NOT NULL AND (end_seq IS NULL OR h.r < end_seq)
)
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools,
       min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(shard, post_seq), min(post_seq)), ev(arg_min(h_shard, release_seq), min(release_seq))] AS events,
       count(*) AS count, count(DISTINCT (shard, xfer)) AS xfers,
       format('{} freed destination slot(s) {} of pool(s) {} (request {}) while {} transfer(s) into them were not observed complete: their late bytes can land in the next owner of those slots.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request,
              count(DISTINCT (shard, xfer))) AS message
FROM bad GROUP BY agent, request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(post_seq);
