-- check: desc_not_owned
-- severity: error
-- needs: descs, layouts, slots
-- summary: a descriptor touches a slot its request does not hold when the transfer is posted
-- explain: For every descriptor end inside an allocator-managed pool, the transfer's
--   request must have allocated the slot before the post (an alloc of it by the request
--   happens-before the post). Only a proven absence counts: an alloc merely unordered
--   with the post (the message naming the slots was not recorded) or lost past a cut is
--   unknown, not "not held". A slot the request held but freed before the post is
--   reported as src_free_before_done / write_after_free instead. Prefix-cache references
--   (shared allocs) count as holding. A transfer touching someone else's slot reads or
--   clobbers another request's KV; misaddressed descriptor indices (see
--   layer_offset_mismatch) also show up here. A descriptor spanning a run of slots
--   (contiguous pages grouped into one) must hold every slot of the run.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- whose slot
--   request VARCHAR    -- the transfer's request
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- first affected slot
--   slots BIGINT[]     -- affected slots
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts
--   count BIGINT       -- descriptor ends on slots not held
--   side VARCHAR       -- src | dst
--   message VARCHAR
WITH run_bad AS (  -- further slots of ends spanning a run of slots, not held
    SELECT * FROM run_hold WHERE h IS NULL AND NOT h_unknown
), bad AS (
    SELECT shard, xfer, side, agent, pool, layer, slot, request, post_seq FROM end_hold
    WHERE managed AND alloc_seq IS NULL AND NOT h_unknown
    UNION ALL
    SELECT shard, xfer, side, agent, pool, layer, slot, request, post_seq FROM run_bad
)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots, list(DISTINCT ev(shard, post_seq) ORDER BY ev(shard, post_seq))[1:4] AS events,
       count(*) AS count, side,
       format('{} transfer(s) of request {} {} {} slot(s) {} of pool {} that the request did not hold when the transfer was posted ({} descriptor ends).',
              count(DISTINCT (shard, xfer)), request, CASE side WHEN 'src' THEN 'read' ELSE 'wrote' END, agent,
              array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','), pool, count(*)) AS message
FROM bad GROUP BY agent, request, pool, side
ORDER BY min(post_seq);
