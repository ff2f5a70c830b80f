-- inflight_seen: from which seq each shard knows a transfer over (xfer_seen.end_seq), the
-- lookup inflight_pairs (inflight.py) filters candidate pairs with.
-- Columns: shard VARCHAR, xfer BIGINT, side_sidx INTEGER, end_seq BIGINT
SELECT shard, xfer, side_sidx, end_seq FROM xfer_seen WHERE end_seq IS NOT NULL
