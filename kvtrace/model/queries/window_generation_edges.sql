-- window_generation_edges (ring windows whose kept state was dropped, model/window.py): pairs
-- of requests tied by a page's content, on every shard: a prefix-cache reference (a shared
-- alloc) and the request of the slot's latest non-shared alloc before it (the generation it
-- continues); a write copying another request's data (detail.src_request) and that request.
-- Columns: a VARCHAR, b VARCHAR  -- the two requests
WITH allocs AS (
    SELECT shard, seq, hash(shard, agent, pool, s.slot) AS sk, request,
           coalesce(detail IS NOT NULL AND json_extract_string(detail, '$.shared') = 'true', false) AS shared
    FROM (SELECT shard, seq, agent, pool, request, detail, unnest(slots) AS slot FROM events WHERE kind = 'alloc') s
), gen AS (SELECT sk, seq, request FROM allocs WHERE NOT shared)
SELECT a.request AS a, g.request AS b
FROM (SELECT * FROM allocs WHERE shared) a ASOF JOIN gen g ON a.sk = g.sk AND a.seq > g.seq
WHERE a.request IS NOT NULL AND g.request IS NOT NULL AND a.request <> g.request
UNION
SELECT request AS a, json_extract_string(detail, '$.src_request') AS b FROM events
WHERE kind = 'write' AND request IS NOT NULL AND detail IS NOT NULL
  AND json_extract_string(detail, '$.src_request') IS NOT NULL
  AND json_extract_string(detail, '$.src_request') <> request;
