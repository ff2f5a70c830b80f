-- check: buffer_class_not_sent
-- severity: error
-- needs: descs, layouts, slots, reads
-- summary: the consumer reads a pool registered on both sides that none of the request's transfers carry
-- explain: For every request whose transfers carry something from a producer agent to a
--   consumer agent, look at the pools the consumer reads for it (pages its own allocation
--   began, not prefix pages shared from an earlier turn, and not written by the consumer
--   itself). A pool the producer also registers but that none of the request's transfers
--   carry into the consumer means the engine silently dropped that buffer class from the
--   transfer: the consumer computes on whatever the pages held. On a trace whose initiating
--   shard is cut short a later transfer may have carried it, so nothing is claimed there.
--   Example: hybrid-model
--   state buffers registered on both sides but never sent
--   (https://github.com/sgl-project/sglang/pull/23773). Only on facts that are all there:
--   when either agent's shard is missing or cut short, a transfer carrying the pool may
--   simply not be in the trace.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- the consumer
--   request VARCHAR
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- first read of the dropped class
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [first read, first post of the request's transfers]
--   count BIGINT       -- (read, slot) pairs of the dropped class
--   src_agent VARCHAR  -- the producer
--   message VARCHAR
-- Cheap first: each descriptor's two ends side by side come from desc_match (no self-join
-- of end_hold's ends here); they are grouped once per transfer, its two agents and the
-- destination pool (few rows), and only then per flow. Then the pools a producer
-- registers that a flow does not carry (few), and only then the consumer's reads.
WITH per_x AS (  -- per transfer and (producer, consumer, destination pool), by the integer ids
                 -- of desc_match_ids (agents, pool, initiator shard): named once per flow below
    -- the pool a descriptor carries: its destination end's, or, where no layout of the
    -- consumer covers that end (a layouts file lost, a pool the hook leaves out), its source
    -- end's: a gap pool is one the producer describes, so a descriptor reading from it has
    -- its source end there, and absence is never concluded from an end nothing maps
    SELECT s_aid AS a, d_aid AS b, any_value(request) AS request, coalesce(d_pid, s_pid) AS d_pid, psidx,
           any_value(post_seq) AS post_seq   -- one request and post per transfer
    FROM desc_match_ids WHERE s_aid <> d_aid
    GROUP BY psidx, xfer, s_aid, d_aid, coalesce(d_pid, s_pid)
), flow_ids AS (   -- producer → consumer per request, and the pools its transfers carry
    SELECT a, b, request, list(DISTINCT d_pid) FILTER (WHERE d_pid IS NOT NULL) AS carried,
           count(DISTINCT (psidx, post_seq)) AS n_x, min(post_seq) AS post_seq, arg_min(psidx, post_seq) AS x_sidx,
           list(DISTINCT psidx) AS x_sidxs
    FROM per_x GROUP BY ALL
), flows AS (
    SELECT n.agents[f.a] AS a, n.agents[f.b] AS b, f.request, list_select(n.pools, f.carried) AS carried,
           f.n_x, f.post_seq, n.shards[f.x_sidx + 1] AS x_shard,
           list_select(n.shards, list_transform(f.x_sidxs, lambda i: i + 1)) AS x_shards
    FROM flow_ids f, id_names n
), reg AS (SELECT DISTINCT agent, pool FROM layouts),
gap AS (   -- a pool the producer registers that none of the flow's transfers carry
    SELECT f.*, g.pool
    FROM flows f JOIN reg g ON g.agent = f.a
    -- "none of the request's transfers" is a fact only when every transfer between the two
    -- agents is recorded: both agents' shards present and not cut (see model/cut.py)
    JOIN agent_home ha ON ha.agent = f.a JOIN shard_cut ca ON ca.shard = ha.h_shard AND ca.cut IS NULL AND ca.untraced = 0
    JOIN agent_home hb ON hb.agent = f.b JOIN shard_cut cb ON cb.shard = hb.h_shard AND cb.cut IS NULL AND cb.untraced = 0
    WHERE NOT list_contains(coalesce(f.carried, []), g.pool)
      -- an absence is proven only where every post is present: no initiator's shard is cut
      -- or ran postings its recorder could not record
      AND NOT EXISTS (SELECT 1 FROM shard_cut c WHERE list_contains(f.x_shards, c.shard)
                                                  AND (c.cut IS NOT NULL OR c.untraced > 0))
), own AS (   -- the consumer's own writes, of the few (consumer, request, pool)s a gap names
    SELECT DISTINCT agent, request, pool FROM writes
    WHERE (agent, request, pool) IN (SELECT (b, request, pool) FROM gap)
),
bad AS (   -- the consumer's reads of such a pool, of pages its own allocation began
    SELECT r.agent, r.request, r.pool, r.shard, r.seq, r.layer, r.slot, f.a, f.n_x, f.post_seq, f.x_shard, f.carried
    FROM reads r JOIN gap f ON f.b = r.agent AND f.request = r.request AND f.pool = r.pool
    WHERE r.managed AND r.alloc_seq IS NOT NULL AND r.alloc_seq = r.gen_seq   -- its own pages
      AND NOT EXISTS (SELECT 1 FROM own o WHERE o.agent = r.agent AND o.request = r.request AND o.pool = r.pool)
)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(shard, seq), min(seq)), ev(any_value(x_shard), min(post_seq))] AS events,
       count(*) AS count, a AS src_agent,
       format('Pool {} is registered on both {} and {}, and {} reads it for request {} (slots {}), but none of the request''s {} transfer(s) from {} carry it (they carry {}): the buffer class was dropped from the transfer.',
              pool, a, agent, agent, request, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','),
              any_value(n_x), a, array_to_string(list_sort(any_value(carried)), '+')) AS message
FROM bad GROUP BY agent, request, pool, a
ORDER BY min(seq);
