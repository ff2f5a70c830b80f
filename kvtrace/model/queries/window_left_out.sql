-- window_left_out (ring windows whose kept state was dropped, model/window.py): per shard,
-- the events inside its cut that the view events leaves out.
-- Columns: shard VARCHAR, n BIGINT
SELECT e.shard, count(*) AS n FROM recorded_events e JOIN shard_cut c ON c.shard = e.shard
WHERE (c.cut IS NULL OR e.seq <= c.cut)
  AND NOT EXISTS (SELECT 1 FROM events v WHERE v.shard = e.shard AND v.seq = e.seq)
GROUP BY e.shard;
