-- xfer_ords: the timeline positions of one transfer's events (the model's xfer_span).
-- Parameters: shard, xfer
-- Columns: ords BIGINT[]
SELECT ords FROM xfer_span WHERE shard = ? AND xfer = ?
