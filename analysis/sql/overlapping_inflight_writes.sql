-- check: overlapping_inflight_writes
-- severity: error
-- needs: descs
-- summary: two in-flight transfers write overlapping bytes that may differ
-- explain: Two transfers whose destination ranges overlap on the same agent, with neither
--   known to have ended (done, error or notification) before the other was posted, race
--   only if the bytes they carry may differ: which bytes win then depends on timing. What
--   each carries is its source slot layer's checksum as of the post (view inflight_writes).
--   Both known and equal, from the same offset of the slot: no hazard (identical replicas,
--   e.g. the metadata every TP rank sends). Known to differ: an error. Unknown (no
--   checksummed write of a source before its post): a warning where both transfers carry
--   one request from two different source agents (identical replicas of it would be legal;
--   the finding names the source pools whose writes to record to decide), an error
--   otherwise. A retry after an observed error, or a new transfer after the previous one
--   completed, is not flagged. One finding per destination agent, request pair and pool.
-- Columns:
--   severity VARCHAR   -- 'error', or 'warning' when every pair is an unknown-content replica candidate
--   agent VARCHAR      -- destination agent
--   request VARCHAR    -- one writer
--   pool VARCHAR, layer INTEGER, slot BIGINT
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [post of one writer, post of the other]
--   count BIGINT       -- overlapping descriptor pairs whose bytes may differ
--   other VARCHAR      -- the other writer's request
--   message VARCHAR
WITH w AS (
    SELECT *, content = 'unknown' AND coalesce(a_request = b_request AND a_src_agent <> b_src_agent, false) AS replica
    FROM inflight_writes WHERE content <> 'same'
), g AS (
    SELECT agent, a_request, b_request, pool, bool_and(replica) AS replica, min(layer) AS layer,
           min(slot) AS slot, list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
           [ev(arg_min(a_shard, a_post), min(a_post)), ev(arg_min(b_shard, a_post), arg_min(b_post, a_post))] AS events,
           count(*) AS count, min(lo) AS lo, min(a_post) AS first,
           list_sort(list_distinct(flatten(list([a_src_agent, b_src_agent])))) AS src_agents,
           list_sort(list_distinct(flatten(list([a_src_pool, b_src_pool])))) AS src_pools
    FROM w GROUP BY agent, a_request, b_request, pool
)
SELECT CASE WHEN replica THEN 'warning' ELSE 'error' END AS severity, agent, a_request AS request, pool, layer,
       slot, slots, events, count, b_request AS other,
       CASE WHEN replica THEN
           format('Transfers of request {} from {} wrote overlapping bytes of {} ({}) while both were in flight ({} descriptor pairs), and the trace holds no checksum of what one or both carried: identical replicas (e.g. metadata every TP rank sends) would be legal, different bytes race. Record checksummed writes of the source slots (pool {}) before the post to decide.',
                  a_request, array_to_string(src_agents, ' and '), agent,
                  CASE WHEN slot IS NULL THEN format('0x{:x}', lo)
                       ELSE format('pool {} slot(s) {}', pool, array_to_string(slots[1:8], ',')) END,
                  count, CASE WHEN len(src_pools) > 0 THEN array_to_string(src_pools, ', ') ELSE '?' END)
       ELSE
           format('Transfers of request {} and request {} wrote overlapping bytes of {} ({}) while both were in flight ({} descriptor pairs): the surviving bytes depend on timing.',
                  a_request, b_request, agent,
                  CASE WHEN slot IS NULL THEN format('0x{:x}', lo)
                       ELSE format('pool {} slot(s) {}', pool, array_to_string(slots[1:8], ',')) END,
                  count) END AS message
FROM g
ORDER BY first;
