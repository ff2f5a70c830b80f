-- xfer_events: the events of one transfer in timeline order: its post, completion,
-- error, release (and replay moves) in the initiator's shard, and the notifications
-- paired with the post.
-- Parameters: shard, xfer
-- Columns: the timeline columns (see source.COLUMNS)
SELECT {cols} FROM tl
WHERE (shard = ?1 AND xfer = ?2) OR (pair_shard = ?1 AND pair_xfer = ?2)
ORDER BY ord
