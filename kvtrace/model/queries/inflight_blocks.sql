-- inflight_blocks: descriptor ends per agent and 16 MiB address block (2**24 bytes: 256 of
-- inflight_pairs' 64 KiB buckets), from which inflight.py cuts the ranges it sweeps one at
-- a time when the ends are too many for one sweep.
-- Columns: agent VARCHAR, block UBIGINT, n BIGINT
SELECT agent, addr // 16777216 AS block, count(*) AS n
FROM end_hold WHERE agent IS NOT NULL AND addr IS NOT NULL
GROUP BY ALL ORDER BY agent, block
