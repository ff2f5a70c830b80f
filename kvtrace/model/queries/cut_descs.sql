-- cut_descs (partial traces), the view descs: the descriptor rows of the transfers posted inside the cut.
CREATE OR REPLACE VIEW descs AS
SELECT d.* FROM recorded_descs d
WHERE (d.shard, d.xfer) IN (SELECT (shard, xfer) FROM events WHERE kind = 'xfer_post');
