-- check: request_waiting
-- severity: warning
-- needs: closed, slots
-- summary: at the end of a complete trace a request still holds pages while it waits for a transfer's notification or status that never came
-- explain: For every (agent, request) still holding slots when a complete trace ends (every
--   shard present and closed), say what it holds and since when, and what it waits for:
--   the transfers of the request that agent takes part in whose end (DONE, error or the
--   paired notification) it never learns, with what their initiator saw (posted and saw
--   DONE, saw an error, or no completion at all), or — when no transfer of the request
--   reaches it — the peer it sent the request's pages to, which never posted. A request
--   whose transfers all ended on its side and that still holds pages is a plain leak.
--   A trace cut short proves nothing about a hang: the check does not run there, and
--   `kvtrace check` lists the same state at trace end as information instead. Examples:
--   an abort while waiting for remote KV leaks the blocks
--   (https://github.com/vllm-project/vllm/issues/46283); a dropped completion notification
--   hangs the request forever (https://github.com/NVIDIA/TensorRT-LLM/issues/17665); a
--   prefill failure that is never signalled leaves decode waiting
--   (https://github.com/sgl-project/sglang/pull/36108).
-- Columns:
--   severity VARCHAR   -- 'warning'
--   agent VARCHAR      -- the waiting agent (holding the pages)
--   request VARCHAR
--   pool VARCHAR       -- the pool held (one finding per pool: its slots are that pool's)
--   pools VARCHAR[]    -- [pool] (kept for readers of earlier output, when one finding spanned pools)
--   layer INTEGER      -- null
--   slot BIGINT, slots BIGINT[]  -- the slots held at trace end
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [first alloc still held, posts awaited or the page message]
--   count BIGINT       -- slots held
--   waits VARCHAR      -- 'notification' (transfers posted, their end never reached it) | 'post' (nobody posted)
--   peer VARCHAR       -- the agent it waits on (the first by name of several: peers)
--   peers VARCHAR[]    -- every agent it waits on (one per prefill rank with heterogeneous TP)
--   message VARCHAR
-- Grouped by the integer key of (shard, agent, pool, slot, request) (slot_ev's hk), and
-- every lookup below is a join on the few requests still holding pages, not a per-row
-- subquery over all events.
WITH last AS (   -- integers only: slot_life_ids, not the slot_life view naming every row
    SELECT hk, arg_max(req_cnt_after, seq) AS held FROM slot_life_ids GROUP BY hk
), held AS (   -- what each (agent, request) holds of each pool at trace end, since its first alloc of it
    SELECT a.agent, a.request, a.pool, any_value(a.shard) AS shard,   -- the agent's one shard
           list(DISTINCT a.slot ORDER BY a.slot) AS slots, count(*) AS n,
           min(a.seq) AS since_seq
    FROM last l JOIN (SELECT s.hk, n.shards[s.sidx + 1] AS shard, s.seq, n.agents[s.aid] AS agent, s.request,
                             s.pool, s.slot
                      FROM slot_life_ids s, id_names n WHERE s.alloc) a ON a.hk = l.hk
    WHERE l.held > 0   -- a holding is named by all five (an alloc with no request names none)
      AND a.agent IS NOT NULL AND a.pool IS NOT NULL AND a.slot IS NOT NULL AND a.request IS NOT NULL
    GROUP BY a.agent, a.request, a.pool   -- one finding per pool: its slots are that pool's
), holder AS (SELECT DISTINCT agent, request, shard FROM held),
t0 AS (SELECT shard, min(t_ns) AS t0 FROM events WHERE shard IN (SELECT shard FROM holder) GROUP BY shard),
involved AS (  -- transfers of the request the holder takes part in, and whether it learnt their end
    SELECT h.agent, h.request, x.shard AS x_shard, x.xfer, x.post_seq, x.agent AS initiator,
           x.done_seq, x.err_seq, s.end_seq
    FROM holder h JOIN xfers x ON x.request = h.request AND (x.agent = h.agent OR x.peer = h.agent)
    JOIN agent_home a ON a.agent = h.agent
    LEFT JOIN xfer_seen s ON s.shard = x.shard AND s.xfer = x.xfer AND s.side_shard = a.h_shard
), per_peer AS (   -- per initiator (one shard each): several with heterogeneous TP (one per prefill rank)
    SELECT agent, request, initiator, x_shard, list(xfer ORDER BY post_seq) AS xs,
           list(ev(x_shard, post_seq) ORDER BY post_seq) AS posts, min(post_seq) AS first_post,
           count(*) FILTER (WHERE done_seq IS NOT NULL) AS n_done, max(done_seq) AS done_seq,
           count(*) FILTER (WHERE err_seq IS NOT NULL) AS n_err, max(err_seq) AS err_seq, count(*) AS n_x,
           initiator = agent AS own
    FROM involved WHERE end_seq IS NULL GROUP BY agent, request, initiator, x_shard
), pending AS (
    SELECT agent, request, flatten(list(xs ORDER BY own DESC, initiator)) AS xs,
           list(initiator ORDER BY initiator) FILTER (WHERE NOT own) AS peers,
           flatten(list(posts ORDER BY own DESC, initiator)) AS posts,
           array_to_string(list(CASE WHEN own THEN
                       format('it waits for the completion status of transfer(s) x{} it posted, never recorded',
                              array_to_string(xs[1:6], ',x'))
                   ELSE
                       format('it waits for the notification of transfer(s) x{} from {}: {} posted them at {}:{} and {}',
                              array_to_string(xs[1:6], ',x'), initiator, initiator, x_shard, posts[1].seq,
                              CASE WHEN n_done = n_x THEN format('saw DONE at {}:{}, but no notification reached {}', x_shard, done_seq, agent)
                                   WHEN n_err > 0 THEN format('saw them fail (error at {}:{}) without telling {}', x_shard, err_seq, agent)
                                   ELSE 'recorded no completion either' END) END
                   ORDER BY own DESC, initiator), '; ') AS waiting
    FROM per_peer GROUP BY agent, request
), asked AS (  -- the page messages the holder sent for the request (when nothing reached it);
               -- a message to itself is a hand-off between its own threads, asking no peer
    SELECT agent, request, list(DISTINCT peer ORDER BY peer) FILTER (WHERE peer IS NOT NULL) AS peers, min(seq) AS seq,
           any_value(shard) AS shard   -- the holder's one shard
    FROM events WHERE kind = 'msg_send' AND request IS NOT NULL AND peer IS DISTINCT FROM agent
      AND request IN (SELECT request FROM holder)   -- of the holders' requests only
    GROUP BY agent, request
), w AS (
    SELECT h.*, p.xs, p.peers AS x_peers, p.posts, p.waiting,
           q.peers AS m_peers, q.seq AS m_seq, q.shard AS m_shard,
           coalesce(ni.n, 0) AS n_involved, e.t_ns - t0.t0 AS since_ns
    FROM held h LEFT JOIN pending p USING (agent, request) LEFT JOIN asked q USING (agent, request)
    LEFT JOIN (SELECT agent, request, count(*) AS n FROM involved GROUP BY ALL) ni USING (agent, request)
    LEFT JOIN events e ON e.shard = h.shard AND e.seq = h.since_seq LEFT JOIN t0 ON t0.shard = h.shard
)
SELECT 'warning' AS severity, agent, request, pool, [pool] AS pools, NULL::INTEGER AS layer, slots[1] AS slot, slots,
       list_concat([ev(shard, since_seq)], CASE WHEN xs IS NOT NULL THEN posts[1:3] ELSE [ev(m_shard, m_seq)] END) AS events,
       n AS count,
       CASE WHEN xs IS NOT NULL THEN 'notification' ELSE 'post' END AS waits,
       CASE WHEN xs IS NOT NULL THEN x_peers[1] ELSE m_peers[1] END AS peer,
       CASE WHEN xs IS NOT NULL THEN coalesce(x_peers, []) ELSE m_peers END AS peers,
       format('At trace end {} holds {} slot(s) of request {} (pool(s) {}: slots {}) since {}:{} (+{} s); {}.',
              agent, n, request, pool, array_to_string(slots[1:8], ','), shard, since_seq,
              round(since_ns / 1e9, 3),
              CASE WHEN xs IS NOT NULL THEN waiting
                   WHEN coalesce(len(m_peers), 0) > 0 THEN
                       format('it waits for the transfer(s) of its pages from {}, which never posted one (the pages went out at {}:{})',
                              array_to_string(m_peers, ' and '), m_shard, m_seq)
                   ELSE 'it waits for transfer(s) no agent posted' END) AS message
FROM w
WHERE xs IS NOT NULL OR n_involved = 0      -- all of its transfers ended on its side: a plain leak
ORDER BY since_seq, pool;
