-- check: layout_mismatch
-- severity: error
-- needs: descs, layouts
-- summary: the two sides store a buffer class transfers copy between them with a different dtype or bytes per token, and the descriptors do not fit both
-- explain: For every buffer class (pool, and K/V part) that transfers copy from one agent to
--   another, compare the two sides' registered geometry: dtype, bytes per slot, page tokens
--   and bytes per token. NIXL copies bytes: a different dtype (bf16 on prefill, fp8 on
--   decode) can never be converted by the copy, and a different size per token is only
--   consistent when the descriptors fit it — a head split (heterogeneous TP) lands a
--   source item inside a destination slot; an item length taken from one side runs past a
--   slot on the other side only. Geometry is compared layer by layer, on the layers both
--   sides register: a pool's layers may differ (a KV-head count or head size per layer in
--   NAS-pruned models, layer groups with their own page size), so one layer stored
--   differently is found even where every other layer agrees. Reported once per (source
--   agent, destination agent, class) with the transfers involved, naming the layers that
--   differ unless every layer does. Examples: bf16 prefill vs fp8 decode index buffers
--   with prefill's item length (https://github.com/sgl-project/sglang/pull/19398), a
--   mismatched hybrid model config between the sides
--   (https://github.com/ai-dynamo/dynamo/pull/12821), layouts that disagree between the
--   context and generation servers (https://github.com/NVIDIA/TensorRT-LLM/issues/6507).
--   `kvtrace check` also lists every geometry difference between the sides, consistent or
--   not, under "Layout differences".
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- the destination agent
--   request VARCHAR    -- the first request whose transfers copy the class
--   pool VARCHAR, part VARCHAR
--   layer INTEGER      -- the first layer that differs (null: every layer both sides register differs)
--   slot BIGINT        -- null
--   slots BIGINT[]     -- empty
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts copying the differing layers
--   count BIGINT       -- descriptors copying the differing layers
--   src_agent VARCHAR
--   differs VARCHAR[]  -- dtype | bytes_per_token
--   uneven BIGINT      -- of those, descriptors that run past a slot on one side only
--   message VARCHAR
-- A "group" below is the layers of one flow and class stored one way on the source and one
-- (other) way on the destination: a uniform pool that differs is one group of every layer.
WITH lg AS (   -- each agent's geometry per layer region of a buffer class
    SELECT DISTINCT agent, pool, coalesce(part, '') AS part, layer, slot_bytes AS sb, page_tokens AS pt, dtype AS dt
    FROM layouts
), ld AS (    -- layers two agents both register and store differently (few): only their descriptors are paired below
    SELECT ga.agent AS a, gb.agent AS b, ga.pool, ga.part, ga.layer,
           ga.sb AS a_sb, ga.pt AS a_pt, ga.dt AS a_dt, gb.sb AS b_sb, gb.pt AS b_pt, gb.dt AS b_dt,
           coalesce(ga.dt <> gb.dt, false) AS d_dtype, coalesce(ga.sb * gb.pt <> gb.sb * ga.pt, false) AS d_bpt,
           dense_rank() OVER (ORDER BY ga.agent, gb.agent, ga.pool, ga.part, ga.sb, ga.pt, ga.dt, gb.sb, gb.pt, gb.dt) AS gid,
           -- runs of consecutive layers of a group share isl (named as ranges: layers 0-3, 7)
           ga.layer - row_number() OVER (PARTITION BY ga.agent, gb.agent, ga.pool, ga.part, ga.sb, ga.pt, ga.dt,
                                                      gb.sb, gb.pt, gb.dt ORDER BY ga.layer) AS isl
    FROM lg ga JOIN lg gb ON gb.pool = ga.pool AND gb.part = ga.part AND gb.layer = ga.layer AND gb.agent <> ga.agent
    WHERE coalesce(ga.dt <> gb.dt, false) OR ga.sb * gb.pt <> gb.sb * ga.pt
), sc AS MATERIALIZED (   -- source ends inside such a layer
    SELECT s.* FROM end_hold s
    SEMI JOIN ld ON ld.a = s.agent AND ld.pool = s.pool AND ld.part = coalesce(s.part, '') AND ld.layer = s.layer
    WHERE s.side = 'src' AND s.pool IS NOT NULL
), pairs AS (   -- the two ends of each such descriptor (the destinations looked up for those alone)
    SELECT s.agent AS a, d.agent AS b, s.pool, coalesce(s.part, '') AS part, s.layer, s.crosses <> d.crosses AS uneven,
           s.request, s.shard, s.post_seq, s.xfer
    FROM sc s JOIN (SELECT * FROM end_hold WHERE side = 'dst' AND (psidx, xfer, pos) IN (SELECT (psidx, xfer, pos) FROM sc)) d
      ON d.psidx = s.psidx AND d.xfer = s.xfer AND d.pos = s.pos
    WHERE d.pool = s.pool AND coalesce(d.part, '') = coalesce(s.part, '') AND s.agent <> d.agent
), gs AS (   -- each group's descriptors (by the source end's layer)
    SELECT ld.gid, count(*) AS n, count(*) FILTER (WHERE p.uneven) AS n_uneven,
           arg_min(p.request, p.post_seq) AS request, min(p.post_seq) AS first_post,
           list(DISTINCT ev(p.shard, p.post_seq) ORDER BY ev(p.shard, p.post_seq))[1:3] AS events,
           list(DISTINCT [p.post_seq, p.xfer] ORDER BY [p.post_seq, p.xfer]) AS xs
    FROM pairs p JOIN ld ON ld.a = p.a AND ld.b = p.b AND ld.pool = p.pool AND ld.part = p.part AND ld.layer = p.layer
    GROUP BY ld.gid
), gl AS (   -- each group's layers, as ranges
    SELECT gid, string_agg(CASE WHEN lo = hi THEN lo::VARCHAR ELSE format('{}-{}', lo, hi) END, ', ' ORDER BY lo) AS ltxt,
           sum(hi - lo + 1)::BIGINT AS nl, min(lo) AS first_layer
    FROM (SELECT gid, isl, min(layer) AS lo, max(layer) AS hi FROM ld GROUP BY gid, isl) GROUP BY gid
), bad AS (   -- groups a byte copy cannot bridge: another dtype, or bytes per token the descriptors do not fit
    SELECT g.*, gs.* EXCLUDE (gid), gl.* EXCLUDE (gid),
           format('{} stores it as {} ({} B per slot of {} tokens, {} B per token), {} as {} ({} B per slot of {} tokens, {} B per token)',
                  g.a, coalesce(g.a_dt, '?'), g.a_sb, g.a_pt, round(g.a_sb / g.a_pt, 2),
                  g.b, coalesce(g.b_dt, '?'), g.b_sb, g.b_pt, round(g.b_sb / g.b_pt, 2)) AS sides
    FROM (SELECT DISTINCT gid, a, b, pool, part, a_sb, a_pt, a_dt, b_sb, b_pt, b_dt, d_dtype, d_bpt FROM ld) g
    JOIN gs USING (gid) JOIN gl USING (gid)
    WHERE g.d_dtype OR (g.d_bpt AND gs.n_uneven > 0)
), common AS (   -- how many layers the two agents of such a flow both register
    SELECT f.a, f.b, f.pool, f.part, count(DISTINCT ga.layer) AS n_common
    FROM (SELECT DISTINCT a, b, pool, part FROM bad) f
    JOIN lg ga ON ga.agent = f.a AND ga.pool = f.pool AND ga.part = f.part
    WHERE EXISTS (SELECT 1 FROM lg gb WHERE gb.agent = f.b AND gb.pool = f.pool AND gb.part = f.part AND gb.layer = ga.layer)
    GROUP BY ALL
), cls AS (
    SELECT g.a, g.b, g.pool, g.part, any_value(c.n_common) AS n_common, count(*) AS n_groups, sum(g.nl)::BIGINT AS nl,
           min(g.first_layer) AS first_layer, any_value(g.sides) AS sides,
           sum(g.n)::BIGINT AS n, sum(g.n_uneven)::BIGINT AS n_uneven, arg_min(g.request, g.first_post) AS request,
           list_sort(list_distinct(flatten(list(g.events))))[1:3] AS events,
           list_sort(list_distinct(flatten(list(g.xs)))) AS xs,
           list_filter(['dtype', 'bytes_per_token'],
               lambda k: (k = 'dtype' AND bool_or(g.d_dtype)) OR (k = 'bytes_per_token' AND bool_or(g.d_bpt))) AS differs,
           string_agg(format('layer{} {}: {}', CASE WHEN g.nl > 1 THEN 's' ELSE '' END, g.ltxt, g.sides), '; '
                      ORDER BY g.first_layer) AS per_layer
    FROM bad g JOIN common c USING (a, b, pool, part)
    GROUP BY g.a, g.b, g.pool, g.part
)
SELECT 'error' AS severity, b AS agent, request, pool, nullif(part, '') AS part,
       CASE WHEN nl < n_common THEN first_layer END::INTEGER AS layer,
       NULL::BIGINT AS slot, []::BIGINT[] AS slots, events, n AS count, a AS src_agent, differs, n_uneven AS uneven,
       CASE WHEN n_groups = 1 AND nl = n_common   -- the whole class, one way: no layer to name
            THEN format('Pool {}{}: {}; {} descriptor(s) copy it from {} to {}',
                        pool, CASE WHEN part <> '' THEN ' part ' || part ELSE '' END, sides, n, a, b)
            ELSE format('Pool {}{} differs on {} of the {} layers both sides register: {}; {} descriptor(s) of transfer{} {}{} copy {} from {} to {}',
                        pool, CASE WHEN part <> '' THEN ' part ' || part ELSE '' END, nl, n_common, per_layer, n,
                        CASE WHEN len(xs) > 1 THEN 's' ELSE '' END,
                        array_to_string(list_transform(xs[1:4], lambda x: 'x' || x[2]), ', '),
                        CASE WHEN len(xs) > 4 THEN ', …' ELSE '' END,
                        CASE WHEN nl > 1 THEN 'those layers' ELSE 'that layer' END, a, b) END
       || CASE WHEN list_contains(differs, 'dtype')
               THEN ': a byte copy cannot convert between the two dtypes' ELSE '' END
       || CASE WHEN n_uneven > 0
               THEN format('{}{} of them run past a slot on one side only (an item length taken from one side)',
                           CASE WHEN list_contains(differs, 'dtype') THEN '; ' ELSE ': ' END, n_uneven)
               ELSE '' END || '.' AS message
FROM cls
ORDER BY b, pool, part;
