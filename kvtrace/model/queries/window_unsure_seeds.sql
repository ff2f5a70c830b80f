-- window_unsure_seeds (ring windows whose kept state was dropped, model/window.py): the
-- requests whose facts may reach back before a start-cut shard's window (start_cut: shard,
-- from_seq, from_t_ns: the window's start on the shard's clock, null when the shards' clocks
-- are not one host's). A request exists from its first req_start on, and every side that
-- handles it records one: a request is *checked* when, on every start-cut shard it touches
-- (has events on, or names an agent of in a post's peer or descriptors), its req_start is
-- there at or after from_seq, the earliest of its req_starts is at or after every start-cut
-- shard's window start, and no event of it comes earlier. Every other request touching a
-- start-cut shard is unsure, and so is one holding a prefix-cache reference (a shared
-- alloc) on a start-cut shard to a slot whose generation start (a non-shared alloc of it
-- before) is not in the trace. Reads the model's events (already cut at the shards' ends).
-- Columns: request VARCHAR
WITH homes AS (   -- where each agent's events are recorded (every shard, if several)
    SELECT DISTINCT agent, shard FROM events WHERE agent IS NOT NULL
), touch AS (
    SELECT DISTINCT request, shard FROM events WHERE request IS NOT NULL
    UNION
    SELECT DISTINCT e.request, h.shard FROM events e JOIN homes h ON h.agent = e.peer WHERE e.request IS NOT NULL
    UNION
    SELECT DISTINCT x.request, h.shard
    FROM descs d JOIN events x ON x.shard = d.shard AND x.xfer = d.xfer AND x.kind = 'xfer_post'
    JOIN homes h ON h.agent = d.src_agent OR h.agent = d.dst_agent
    WHERE x.request IS NOT NULL
), starts AS (
    SELECT request, shard, min(seq) AS seq, min(t_ns) AS t FROM events
    WHERE kind = 'req_start' AND request IS NOT NULL GROUP BY ALL
), r AS (
    SELECT e.request, min(e.t_ns) AS t_first, (SELECT min(t) FROM starts s WHERE s.request = e.request) AS t0
    FROM events e WHERE e.request IS NOT NULL GROUP BY e.request
), missing_start AS (   -- a touched start-cut shard without the request's req_start inside its window
    SELECT DISTINCT t.request FROM touch t JOIN start_cut c USING (shard)
    LEFT JOIN starts s ON s.request = t.request AND s.shard = t.shard
    WHERE s.seq IS NULL OR s.seq < c.from_seq
), early AS (   -- events before a window's from_seq (kept ones: present, yet their owner's past is not)
    SELECT DISTINCT e.request FROM events e JOIN start_cut s USING (shard)
    WHERE e.request IS NOT NULL AND e.seq < s.from_seq
), allocs AS (
    SELECT e.shard, e.seq, e.agent, e.pool, e.request, unnest(e.slots) AS slot,
           coalesce(e.detail IS NOT NULL AND json_extract_string(e.detail, '$.shared') = 'true', false) AS shared
    FROM events e JOIN start_cut s USING (shard) WHERE e.kind = 'alloc'
), orphan AS (
    SELECT a.request FROM allocs a
    WHERE a.shared AND a.request IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM allocs g WHERE NOT g.shared AND g.shard = a.shard AND g.agent IS NOT DISTINCT FROM a.agent
          AND g.pool IS NOT DISTINCT FROM a.pool AND g.slot = a.slot AND g.seq < a.seq)
)
SELECT request FROM missing_start
UNION
SELECT t.request FROM (SELECT DISTINCT request FROM touch t JOIN start_cut USING (shard)) t JOIN r USING (request)
WHERE NOT coalesce(r.t0 IS NOT NULL AND r.t_first >= r.t0
                   AND r.t0 >= (SELECT max(from_t_ns) FROM start_cut)
                   AND NOT EXISTS (SELECT 1 FROM start_cut WHERE from_t_ns IS NULL), false)
UNION
SELECT request FROM early
UNION
SELECT DISTINCT request FROM orphan;
