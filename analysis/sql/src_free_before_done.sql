-- check: src_free_before_done
-- severity: error
-- needs: descs, layouts, slots
-- summary: a source slot went back to the allocator before any completion of the transfer reading it was observed
-- explain: For every descriptor source slot, take the holding of the transfer's request
--   that covers the post and the first free that returns the slot to the allocator
--   (counting shared prefix references). If no xfer_done, xfer_error or paired
--   notification of the transfer happens-before that free — including a free before the
--   post — the next owner can overwrite bytes the transfer is still reading
--   (ai-dynamo/dynamo #826). Freeing a shared slot
--   while another request still holds it is not a release and is not flagged.
--   A descriptor spanning a run of slots (grouped contiguous pages) is checked for every
--   slot of the run.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- the source agent (whose slot was freed)
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
    SELECT * FROM run_hold WHERE side = 'src'
), bad AS (
    SELECT shard, xfer, agent, pool, layer, slot, request, post_seq, h_shard, release_seq FROM end_hold e
    WHERE e.managed AND e.alloc_seq IS NOT NULL AND e.side = 'src' AND e.release_seq IS NOT NULL
      AND (e.end_seq IS NULL OR e.release_seq < e.end_seq)  -- and before the end is known
    UNION ALL
    SELECT shard, xfer, agent, pool, layer, slot, request, post_seq, h_shard, h.r FROM run_h
    WHERE h.r IS NOT NULL AND (end_seq IS NULL OR h.r < end_seq)
)
SELECT 'error' AS severity, agent, request, pool, [pool] AS pools,
       min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(shard, post_seq), min(post_seq)), ev(arg_min(h_shard, release_seq), min(release_seq))] AS events,
       count(*) AS count, count(DISTINCT (shard, xfer)) AS xfers,
       format('{} freed source slot(s) {} of pool(s) {} for request {} before any completion of the {} transfer(s) reading them was observed (no done/notification happens-before the free): a new owner can overwrite bytes still in flight.',
              agent, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, request,
              count(DISTINCT (shard, xfer))) AS message
FROM bad GROUP BY agent, request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(post_seq);
