-- inflight_blocks: descriptor ends per agent and 64 KiB address bucket (inflight_pairs'
-- bucket: ends are only compared within one), from which inflight.py cuts the ranges it
-- sweeps one at a time when the ends are too many for one sweep. Buckets, not larger
-- blocks: a long trace piles ever more ends into the same addresses (slots are reused),
-- and a range can be no smaller than its unit (100M events: 16 MiB blocks of ~10M ends
-- each, 5.0 GB resident in one sweep under a 3 GB cap).
-- Columns: agent INTEGER (the agent's id, end_hold_ids.aid), block UBIGINT (the bucket), n BIGINT
SELECT aid AS agent, addr // 65536 AS block, count(*) AS n
FROM end_hold_ids WHERE aid IS NOT NULL AND addr IS NOT NULL
GROUP BY ALL ORDER BY agent, block
