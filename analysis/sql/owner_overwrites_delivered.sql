-- check: owner_overwrites_delivered
-- severity: error
-- needs: descs, layouts, slots, writes
-- summary: the consumer's own write replaced bytes a transfer delivered into its page before any read of them
-- explain: For every slot layer a transfer of request R delivers into (R holding the
--   destination slot when the transfer is posted; every slot of a descriptor spanning a run),
--   look for a write by R on the consumer to that slot layer that does not happen-before the
--   post, while R still holds the slot, with no read of the slot layer between the post and
--   the write. Such a write replaces the delivered content when the pool holds one state per
--   request (no allocation in it on that agent has a page ordinal above 0, e.g. a hybrid
--   model's recurrent state) or when its page ordinal is below the last page R's transfers
--   delivered in that pool — not an append to the partly filled last page. Examples:
--   a hybrid model's decode clears the just-transferred recurrent state
--   (https://github.com/sgl-project/sglang/issues/32995); decode pads the prompt tail as an
--   MTP step and overwrites received KV (https://github.com/vllm-project/vllm/pull/47466).
--   Legal: clearing or initializing before the transfer is posted, appending to the partly
--   filled last page, writing after reading, and a later turn writing a prefix page it
--   shares from an earlier turn.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- the consumer (who wrote over the delivered bytes)
--   request VARCHAR
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- first affected slot layer
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [the delivering transfer's post, the overwriting write]
--   count BIGINT       -- overwritten (slot layer, write) pairs
--   how VARCHAR        -- 'state' (one-state pool) | 'page' (below the last delivered page)
--   message VARCHAR
-- The candidate overwrites (the request's write after the post, within its holding) come
-- first; the last page delivered and the reads in between are looked up for those alone.
WITH deliv AS NOT MATERIALIZED (   -- slot layers transfers deliver into, with the holding they land in
    SELECT shard, xfer, post_seq, bound, agent, pool, layer, slot, lk, request, alloc_seq, free_seq, page
    FROM end_hold WHERE side = 'dst' AND managed AND alloc_seq IS NOT NULL
    UNION ALL
    SELECT shard, xfer, post_seq, bound, agent, pool, layer, slot, lk, request, h.a, h.f, h.p
    FROM run_hold WHERE side = 'dst' AND h IS NOT NULL
), w AS (   -- writes on the consumers' side only (a producer's writes never qualify)
    SELECT * FROM writes
    -- (the consumers' (home shard, agent, pool)s by their integer ids first, named after: a few)
    WHERE (shard, agent, pool) IN (SELECT DISTINCT (n.shards[e.h_sidx + 1], n.agents[e.aid], n.pools[e.pid])
                                   FROM (SELECT DISTINCT h_sidx, aid, pid FROM end_hold_ids WHERE dst) e, id_names n)
), cand AS (
    SELECT d.*, w.seq AS w_seq, w.shard AS w_shard, w.page AS w_page0
    -- only the deliveries into slot layers the consumer writes take the join (none where it never writes)
    FROM (SELECT * FROM deliv WHERE lk IN (SELECT lk FROM w)) d
    JOIN w ON w.lk = d.lk AND w.request = d.request
    WHERE NOT w.seq <= d.bound                          -- not before the post
      AND w.seq > d.alloc_seq AND (d.free_seq IS NULL OR w.seq < d.free_seq)
), last_page AS (  -- the last page R's transfers delivered in a pool
    SELECT agent, pool, request, max(page) AS last_page FROM deliv
    WHERE (agent, pool, request) IN (SELECT (agent, pool, request) FROM cand)   -- hashes the few candidates
    GROUP BY ALL
), one_state AS (  -- pools holding one state per request: no page above 0 on that agent
    -- (slot_life_ids' alloc rows: slot_ev's, without re-reading the events: 0.85 -> 0.28 cpu-s at 10M;
    -- grouped by the agent's integer id, named after for the few (agent, pool)s)
    SELECT n.agents[o.aid] AS agent, o.pool
    FROM (SELECT aid, pool FROM slot_life_ids WHERE alloc GROUP BY ALL HAVING max(coalesce(page, 0)) = 0) o, id_names n
), over AS (
    SELECT d.* EXCLUDE (w_page0), coalesce(d.w_page0, d.page) AS w_page,
           CASE WHEN o.pool IS NOT NULL THEN 'state' ELSE 'page' END AS how
    FROM cand d
    JOIN last_page l ON l.agent = d.agent AND l.pool = d.pool AND l.request = d.request
    LEFT JOIN one_state o ON o.agent = d.agent AND o.pool = d.pool
    WHERE (o.pool IS NOT NULL OR coalesce(d.w_page0, d.page) < l.last_page)
      AND NOT EXISTS (SELECT 1 FROM reads r          -- no read of the delivered bytes before it
                      WHERE r.lk = d.lk AND NOT r.seq <= d.bound AND r.seq < d.w_seq)
), bad AS (  -- one row per (slot layer, write): the latest delivery it overwrites
    SELECT lk, w_seq, any_value(w_shard) AS w_shard, arg_max(shard, post_seq) AS x_shard, max(post_seq) AS post_seq,
           arg_max(xfer, post_seq) AS xfer, any_value(agent) AS agent, any_value(pool) AS pool,
           any_value(layer) AS layer, any_value(slot) AS slot, any_value(request) AS request,
           any_value(w_page) AS w_page, any_value(how) AS how
    FROM over GROUP BY lk, w_seq
)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [ev(arg_min(x_shard, w_seq), arg_min(post_seq, w_seq)), ev(arg_min(w_shard, w_seq), min(w_seq))] AS events,
       count(*) AS count, how,
       -- every page and transfer of the group: one write event covers several pages (they tie
       -- on w_seq), and a request's pages may come by several transfers (chunks, ranks)
       format('{} wrote {} slot-layer(s) of pool {} for request {} (slots {}, page{} {}) over the bytes {} delivered, before any read of them: {}.',
              agent, count(*), pool, request, array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','),
              CASE WHEN count(DISTINCT w_page) > 1 THEN 's' ELSE '' END,
              array_to_string(list(DISTINCT w_page ORDER BY w_page)[1:8], ','),
              CASE WHEN count(DISTINCT (x_shard, xfer)) = 1 THEN format('transfer x{}', min(xfer))
                   WHEN count(DISTINCT x_shard) = 1
                   THEN 'transfers x' || array_to_string(list(DISTINCT xfer ORDER BY xfer)[1:6], ',x')
                   ELSE 'transfers ' || array_to_string(list(DISTINCT format('x{} of {}', xfer, x_shard)
                                                             ORDER BY format('x{} of {}', xfer, x_shard))[1:6], ', ') END,
              CASE how WHEN 'state' THEN 'the pool holds one state per request, so the write replaces the transferred state'
                       ELSE 'the page lies below the last page delivered, so the write replaces received content instead of appending to the partly filled last page' END) AS message
FROM bad GROUP BY agent, request, pool, how
ORDER BY min(w_seq);
