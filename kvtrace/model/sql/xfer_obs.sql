-- xfer_obs: every event that observes a transfer's end, on the side it happens.
-- The initiator observes by xfer_done (data) or xfer_error (over, no data); the target by
-- the notification paired with the post (sync_pairs). Session code turns these into
-- xfer_seen: from which seq on each shard the end is known (happens-before).
-- requires: events, shards, sync_pairs
-- Columns:
--   shard VARCHAR, xfer BIGINT   -- the transfer (initiator shard, id)
--   obs_sidx INTEGER, obs_seq BIGINT  -- the observing event
--   data BOOLEAN                 -- true: the data is complete (done/notification); false: error
CREATE OR REPLACE TABLE xfer_obs AS
SELECT e.shard, e.xfer, s.sidx AS obs_sidx, e.seq AS obs_seq, e.kind = 'xfer_done' AS data
FROM events e JOIN shards s USING (shard)
WHERE e.kind IN ('xfer_done', 'xfer_error') AND e.xfer IS NOT NULL
UNION ALL
SELECT send_shard, send_xfer, recv_sidx, recv_seq, true
FROM sync_pairs WHERE send_kind = 'xfer_post';
