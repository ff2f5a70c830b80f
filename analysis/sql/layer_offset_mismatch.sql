-- check: layer_offset_mismatch
-- severity: error
-- needs: descs, layouts, slots
-- summary: destination (pool, layer, page)s of a request are not covered exactly once by the same (pool, layer, page) of the source
-- explain: Each descriptor should copy page g of layer L of pool P of the request on the
--   source into page g of layer L of pool P on the destination (pages from each side's
--   alloc events; an alloc that recorded no pages leaves its slots' tokens unknown, and a
--   descriptor of zero bytes moves nothing: neither is checked). Descriptors whose ends disagree, land outside the request's pages, or
--   cover a destination twice within one transfer are stray. It finds the
--   uniform-slot-count bug: descriptor indices computed as layer * M + page with one pool's
--   slot count M applied to a pool with a different one. When the prepped indices of the
--   request fit layer * M' + page for one M' taken from another pool, the finding names
--   that stride.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- destination agent
--   request VARCHAR
--   pool VARCHAR       -- destination pool of the stray descriptors
--   layer INTEGER, slot BIGINT  -- first stray destination (layer, slot)
--   slots BIGINT[]     -- stray destination slots
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts with stray descriptors
--   count BIGINT       -- stray descriptors
--   missing BIGINT     -- (layer, page)s of the request's delivered pages never covered correctly
--   missing_slots BIGINT[]  -- the request's destination slots with such a page
--   stride BIGINT      -- M' that explains the indices (null: none found)
--   stride_pool VARCHAR  -- the pool whose slot count M' is
--   pool_slots BIGINT  -- the destination pool's real slot count (of the first stray destination's layer)
--   message VARCHAR
-- which descriptors are wrong is the model's desc_match (the rule is explained there;
-- the TUI inspector reads the same view)
WITH d AS NOT MATERIALIZED (SELECT * FROM desc_match WHERE checked),   -- inlined: each use scans only its columns
stray AS (SELECT * FROM d WHERE NOT ok OR dup),
sg AS (
    SELECT request, d_agent AS agent, d_pool AS pool, count(*) AS n_stray,
           arg_min(d_layer, (post_seq, pos)) AS layer, arg_min(d_slot, (post_seq, pos)) AS slot,
           list(DISTINCT d_slot ORDER BY d_slot) AS slots, list(DISTINCT ev(shard, post_seq) ORDER BY ev(shard, post_seq))[1:4] AS events,
           min(post_seq) AS first_post,
           arg_min(format('layer {} slot {} got the bytes of {} layer {} slot {}{}', d_layer, d_slot, s_pool, s_layer, s_slot,
                          CASE WHEN problem = 'source slot not held by the request' THEN ', which the request does not hold'
                               WHEN s_page IS NULL THEN '' ELSE ' (page ' || s_page || ')' END),
                   (post_seq, pos)) AS example
    FROM stray GROUP BY ALL
), sk AS (SELECT DISTINCT request, agent, pool FROM sg),   -- coverage is only reported for these
okd AS (    -- the correct descriptors of a (request, pool) with stray ones (few: no grouping of all)
    SELECT d.* FROM d SEMI JOIN sk ON sk.request = d.request AND sk.agent = d.d_agent AND sk.pool = d.d_pool
    WHERE d.ok
), cov AS (  -- correct coverage: which (layer, page)s of each pool the request received
    SELECT request, d_agent AS agent, d_pool AS pool, d_layer, d_page FROM okd GROUP BY ALL
), nl AS (SELECT agent, pool, count(DISTINCT layer) AS n_layers FROM lay GROUP BY ALL),
pages AS (
    SELECT request, agent, pool, count(DISTINCT d_page) AS n_pages, count(*) AS n_cov FROM cov GROUP BY ALL
), short AS (  -- the request's own destination slots that miss some layer
    SELECT d.request, d.d_agent AS agent, d.d_pool AS pool, list(DISTINCT d.d_slot ORDER BY d.d_slot) AS missing_slots
    FROM (SELECT request, d_agent, d_pool, d_page, any_value(d_slot) AS d_slot, count(DISTINCT d_layer) AS n
          FROM okd GROUP BY ALL) d
    JOIN nl ON nl.agent = d.d_agent AND nl.pool = d.d_pool
    WHERE d.n < nl.n_layers GROUP BY ALL
),
-- stride explanation: does idx = region * M' + page fit every prepped index of the request?
ix AS (
    -- only the descriptors into the mismatched pool: other lists (aux, state) fit their own
    -- counts trivially and must not lend their stride to the explanation
    SELECT request, d_agent AS agent, s_agent, shard, d_dlist, d_idx, s_dlist, s_idx FROM d
    WHERE d_idx IS NOT NULL AND (request, d_agent, d_pool) IN (SELECT (request, agent, pool) FROM sg)
), cand AS (
    -- candidate strides: the slot count of each pool in the destination list, with the same
    -- pool's count in the source list (each side indexes its own list with its own counts)
    SELECT DISTINCT l.shard, l.d_dlist, l.s_dlist, rd.num_slots AS m, rd.pool AS m_pool, rs.num_slots AS ms
    FROM (SELECT DISTINCT shard, d_dlist, s_dlist FROM ix) l
    JOIN dl_region rd ON rd.shard = l.shard AND rd.dlist = l.d_dlist
    LEFT JOIN dl_region rs ON rs.shard = l.shard AND rs.dlist = l.s_dlist AND rs.pool = rd.pool
), held AS (   -- the holdings of the requests with mismatched descriptors only
    SELECT DISTINCT agent, pool, slot, request FROM holdings WHERE request IN (SELECT request FROM ix)
),
one AS (
    -- per descriptor and candidate stride: is there one region position p with
    -- dst_idx = p * M + (a slot the request holds in region p's pool on the destination)
    -- and, when the source list is prepped too, src_idx = p * M_src + (a slot it holds on
    -- the source)? The engine computed both ends with one formula and one p; a slot may
    -- exceed M (its index then lands in a later region). Without a prepped source the slot
    -- must be below M (p = idx // M): a lone index fits too many p otherwise.
    SELECT ix.request, ix.agent, c.m, c.m_pool, ix.shard, ix.d_dlist, ix.d_idx, ix.s_idx,
           bool_or(hd.request IS NOT NULL AND (c.ms IS NULL OR ix.s_idx IS NULL OR hs.request IS NOT NULL)) AS ok
    FROM ix JOIN cand c ON c.shard = ix.shard AND c.d_dlist = ix.d_dlist AND c.s_dlist IS NOT DISTINCT FROM ix.s_dlist
    LEFT JOIN dl_region rd ON rd.shard = ix.shard AND rd.dlist = ix.d_dlist
         AND ix.d_idx >= rd.region * c.m AND ix.d_idx - rd.region * c.m < rd.num_slots
         AND ((c.ms IS NOT NULL AND ix.s_idx IS NOT NULL) OR rd.region = ix.d_idx // c.m)
    LEFT JOIN held hd ON hd.agent = ix.agent AND hd.pool = rd.pool AND hd.slot = ix.d_idx - rd.region * c.m
         AND hd.request = ix.request
    LEFT JOIN dl_region rs ON rs.shard = ix.shard AND rs.dlist = ix.s_dlist AND rs.region = rd.region
    LEFT JOIN held hs ON hs.agent = ix.s_agent AND hs.pool = rs.pool AND hs.slot = ix.s_idx - rd.region * c.ms
         AND hs.request = ix.request
    GROUP BY ALL
), fit AS (   -- per stride: every pool of the list with that slot count (kv and v may share one)
    SELECT request, agent, m, array_to_string(list(DISTINCT m_pool ORDER BY m_pool), '/') AS m_pool,
           count(*) AS n, count(*) FILTER (WHERE ok) AS n_fit
    FROM one GROUP BY request, agent, m
), best AS (   -- one stride that fits every descriptor, with its own pools (the smallest of several)
    SELECT request, agent, m, m_pool FROM fit WHERE n_fit = n
    QUALIFY row_number() OVER (PARTITION BY request, agent ORDER BY m) = 1
), real AS (   -- the slot count of the first stray destination's layer (a pool's layers may differ)
    SELECT agent, pool, layer, any_value(num_slots) AS pool_slots FROM lay GROUP BY ALL
)
SELECT 'error' AS severity, sg.agent, sg.request, sg.pool, sg.layer, sg.slot, sg.slots, sg.events,
       sg.n_stray AS count,
       greatest(coalesce(nl.n_layers * p.n_pages - p.n_cov, 0), 0) AS missing, sh.missing_slots,
       CASE WHEN b.m <> real.pool_slots THEN b.m END AS stride,
       CASE WHEN b.m <> real.pool_slots THEN b.m_pool END AS stride_pool, real.pool_slots,
       format('Request {}: {} descriptor(s) into {} pool {} do not copy the same (pool, layer, page) from the source (e.g. {}){}{}',
              sg.request, sg.n_stray, sg.agent, sg.pool, sg.example,
              CASE WHEN coalesce(nl.n_layers * p.n_pages - p.n_cov, 0) > 0
                   THEN format('; {} (layer, page)s of its pages were never delivered correctly', nl.n_layers * p.n_pages - p.n_cov) ELSE '' END,
              CASE WHEN b.m <> real.pool_slots
                   THEN format(' — the indices fit layer * {} + page: pool {}''s slot count (M={}) applied to pool {} (M={}).',
                               b.m, b.m_pool, b.m, sg.pool, real.pool_slots)
                   ELSE '.' END) AS message
FROM sg
LEFT JOIN pages p USING (request, agent, pool)
LEFT JOIN nl USING (agent, pool)
LEFT JOIN short sh USING (request, agent, pool)
LEFT JOIN best b USING (request, agent)
LEFT JOIN real USING (agent, pool, layer)
ORDER BY sg.first_post;
