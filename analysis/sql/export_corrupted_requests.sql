-- export_corrupted_requests: per request, whether the consumer read bytes that differ
-- from what the producer wrote for the same (request, pool, layer, page). Ground truth
-- from checksums alone (no labels): a read slot is corrupted when its checksum matches
-- none of the producer's writes of that page. Requests without comparable reads (e.g.
-- aborted before reading) are not listed. Used when the engine left no verifier summary.
-- Columns:
--   request        the request key
--   pages_read     (pool, layer, page) instances read that have a producer write to compare
--   pages_bad      of those, how many matched no write
--   corrupted      pages_bad > 0
WITH w AS (
    SELECT request, pool, layer, unnest(pages) AS page, unnest(checksums) AS checksum
    FROM events
    WHERE kind = 'write' AND checksums IS NOT NULL AND pages IS NOT NULL
      AND json_extract_string(detail, '$.src_request') IS NULL
), r AS (
    SELECT shard, seq, request, pool, layer, unnest(pages) AS page, unnest(checksums) AS checksum
    FROM events
    WHERE kind = 'read' AND checksums IS NOT NULL AND pages IS NOT NULL
), judged AS (
    SELECT r.request, r.pool, r.layer, r.page,
           bool_or(w.checksum = r.checksum) AS ok
    FROM r JOIN w ON w.request = r.request AND w.pool = r.pool AND w.layer = r.layer AND w.page = r.page
    GROUP BY r.shard, r.seq, r.request, r.pool, r.layer, r.page
)
SELECT request, count(*) AS pages_read, count(*) FILTER (WHERE NOT ok) AS pages_bad,
       count(*) FILTER (WHERE NOT ok) > 0 AS corrupted
FROM judged
GROUP BY request
ORDER BY request
