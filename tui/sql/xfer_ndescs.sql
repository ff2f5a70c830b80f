-- xfer_ndescs: how many descriptors one transfer has.
-- Parameters: shard, xfer
-- Columns: n BIGINT
SELECT count(*) AS n FROM descs WHERE shard = ? AND xfer = ?
