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
--   slot on the other side only. Reported once per (source agent, destination agent,
--   class) with the transfers involved. Examples: bf16 prefill vs fp8 decode index buffers
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
--   layer INTEGER, slot BIGINT  -- null
--   slots BIGINT[]     -- empty
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts copying the class
--   count BIGINT       -- descriptors copying the class
--   src_agent VARCHAR
--   differs VARCHAR[]  -- dtype | bytes_per_token
--   uneven BIGINT      -- descriptors that run past a slot on one side only
--   message VARCHAR
WITH geo AS (   -- each agent's geometry per buffer class
    SELECT agent, pool, coalesce(part, '') AS part, min(slot_bytes) AS sb, min(page_tokens) AS pt,
           min(dtype) AS dt, count(DISTINCT layer) AS regions
    FROM layouts GROUP BY ALL
), gd AS (    -- classes two agents store differently (few): only their descriptors are paired below
    SELECT ga.agent AS a, gb.agent AS b, ga.pool, ga.part FROM geo ga
    JOIN geo gb ON gb.pool = ga.pool AND gb.part = ga.part AND gb.agent <> ga.agent
    WHERE coalesce(ga.dt <> gb.dt, false) OR ga.sb * gb.pt <> gb.sb * ga.pt
), sc AS MATERIALIZED (   -- source ends inside such a class
    SELECT s.* FROM end_hold s
    SEMI JOIN gd ON gd.a = s.agent AND gd.pool = s.pool AND gd.part = coalesce(s.part, '')
    WHERE s.side = 'src' AND s.pool IS NOT NULL
), pairs AS (   -- the two ends of each such descriptor (the destinations looked up for those alone)
    SELECT s.agent AS a, d.agent AS b, s.pool, coalesce(s.part, '') AS part, s.crosses <> d.crosses AS uneven,
           s.request, s.shard, s.post_seq
    FROM sc s JOIN (SELECT * FROM end_hold WHERE side = 'dst' AND (psidx, xfer, pos) IN (SELECT (psidx, xfer, pos) FROM sc)) d
      ON d.psidx = s.psidx AND d.xfer = s.xfer AND d.pos = s.pos
    WHERE d.pool = s.pool AND coalesce(d.part, '') = coalesce(s.part, '') AND s.agent <> d.agent
), cls AS (
    SELECT a, b, pool, part, count(*) AS n, count(*) FILTER (WHERE uneven) AS n_uneven,
           arg_min(request, post_seq) AS request, list(DISTINCT ev(shard, post_seq) ORDER BY ev(shard, post_seq))[1:3] AS events
    FROM pairs GROUP BY ALL
), j AS (
    SELECT c.*, ga.sb AS a_sb, ga.pt AS a_pt, ga.dt AS a_dt, gb.sb AS b_sb, gb.pt AS b_pt, gb.dt AS b_dt,
           list_filter(['dtype', 'bytes_per_token'],
               lambda k: (k = 'dtype' AND coalesce(ga.dt <> gb.dt, false))
                      OR (k = 'bytes_per_token' AND ga.sb * gb.pt <> gb.sb * ga.pt)) AS differs
    FROM cls c JOIN geo ga ON ga.agent = c.a AND ga.pool = c.pool AND ga.part = c.part
    JOIN geo gb ON gb.agent = c.b AND gb.pool = c.pool AND gb.part = c.part
)
SELECT 'error' AS severity, b AS agent, request, pool, nullif(part, '') AS part, NULL::INTEGER AS layer,
       NULL::BIGINT AS slot, []::BIGINT[] AS slots, events, n AS count, a AS src_agent, differs, n_uneven AS uneven,
       format('Pool {}{}: {} stores it as {} ({} B per slot of {} tokens, {} B per token), {} as {} ({} B per slot of {} tokens, {} B per token); {} descriptor(s) copy it from {} to {}{}.',
              pool, CASE WHEN part <> '' THEN ' part ' || part ELSE '' END,
              a, coalesce(a_dt, '?'), a_sb, a_pt, round(a_sb / a_pt, 2), b, coalesce(b_dt, '?'), b_sb, b_pt, round(b_sb / b_pt, 2),
              n, a, b,
              CASE WHEN list_contains(differs, 'dtype')
                   THEN ': a byte copy cannot convert between the two dtypes' ELSE '' END
              || CASE WHEN n_uneven > 0
                   THEN format('{}{} of them run past a slot on one side only (an item length taken from one side)',
                               CASE WHEN list_contains(differs, 'dtype') THEN '; ' ELSE ': ' END, n_uneven)
                   ELSE '' END) AS message
FROM j
WHERE list_contains(differs, 'dtype') OR (list_contains(differs, 'bytes_per_token') AND n_uneven > 0)
ORDER BY b, pool, part;
