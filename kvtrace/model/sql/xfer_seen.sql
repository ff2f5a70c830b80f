-- xfer_seen: from which seq on each shard a transfer's end is known (happens-before):
-- the first event of the side shard that an observation of the end (xfer_obs) happens-before.
-- requires: xfer_seen_raw, shards
-- Columns:
--   shard VARCHAR, xfer BIGINT         -- the transfer (initiator shard, id)
--   side_shard VARCHAR, side_sidx INTEGER  -- the shard that comes to know
--   seen_seq BIGINT   -- data known complete from here (null: never)
--   end_seq BIGINT    -- transfer known over (done, error or notification) from here
CREATE OR REPLACE TABLE xfer_seen AS
SELECT x.shard, r.xfer, s.shard AS side_shard, r.side_sidx,
       min(r.first) FILTER (WHERE r.data) AS seen_seq,
       min(r.first) AS end_seq
FROM xfer_seen_raw r JOIN shards x ON x.sidx = r.xsidx JOIN shards s ON s.sidx = r.side_sidx
GROUP BY ALL;
