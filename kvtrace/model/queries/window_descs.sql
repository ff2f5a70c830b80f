-- window_descs (ring windows whose kept state was dropped, model/window.py), the view descs:
-- the descriptor rows of the transfers posted inside the cut (as cut_descs), less those of
-- unsure requests' transfers (window_unsure) and of transfers without a request posted on
-- a start-cut shard before its window.
CREATE OR REPLACE VIEW descs AS
SELECT d.* FROM recorded_descs d
WHERE (d.shard, d.xfer) IN (
    SELECT (e.shard, e.xfer) FROM events e LEFT JOIN start_cut s ON s.shard = e.shard
    WHERE e.kind = 'xfer_post'
      AND NOT coalesce(e.request IN (SELECT request FROM window_unsure), false)
      AND NOT (e.request IS NULL AND s.shard IS NOT NULL AND e.seq < s.from_seq));
