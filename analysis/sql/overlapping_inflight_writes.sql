-- check: overlapping_inflight_writes
-- severity: error
-- needs: descs
-- summary: two in-flight transfers write overlapping bytes
-- explain: Works on bytes alone. Two transfers whose destination ranges overlap on the
--   same agent, with neither known to have ended (done, error or notification) before the
--   other was posted, race: which bytes win depends on timing. A retry after an observed
--   error, or a new transfer after the previous one completed, is not flagged.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- destination agent
--   request VARCHAR    -- one writer
--   pool VARCHAR, layer INTEGER, slot BIGINT
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [post of one writer, post of the other]
--   count BIGINT       -- overlapping descriptor pairs
--   other VARCHAR      -- the other writer's request
--   message VARCHAR
SELECT 'error' AS severity, agent, a_request AS request, min(pool) AS pool, min(layer) AS layer,
       min(slot) AS slot, list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
       [ev(arg_min(a_shard, a_post), min(a_post)), ev(arg_min(b_shard, a_post), arg_min(b_post, a_post))] AS events,
       count(*) AS count, b_request AS other,
       format('Transfers of request {} and request {} wrote overlapping bytes of {} ({}) while both were in flight ({} descriptor pairs): the surviving bytes depend on timing.',
              a_request, b_request, agent,
              CASE WHEN min(slot) IS NULL THEN format('0x{:x}', min(lo))
                   ELSE format('pool {} slot(s) {}', min(pool), array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ',')) END,
              count(*)) AS message
FROM inflight_pairs WHERE a_side = 'dst' AND b_side = 'dst'
GROUP BY agent, a_request, b_request, pool   -- one finding per pool: its slots are that pool's
ORDER BY min(a_post);
