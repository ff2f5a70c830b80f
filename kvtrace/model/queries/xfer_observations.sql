-- xfer_observations: every observation of a transfer's end with the initiator's shard index.
-- Columns: xsidx INTEGER, xfer BIGINT, obs_sidx INTEGER, obs_seq BIGINT, data BOOLEAN
SELECT x.sidx AS xsidx, o.xfer, o.obs_sidx, o.obs_seq, o.data
FROM xfer_obs o JOIN shards x ON x.shard = o.shard
