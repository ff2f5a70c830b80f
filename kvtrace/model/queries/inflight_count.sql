-- inflight_count: how many descriptor ends inflight_pairs (inflight.py) sweeps.
-- Columns: n BIGINT
SELECT count(*) AS n FROM end_hold_ids WHERE aid IS NOT NULL AND addr IS NOT NULL
