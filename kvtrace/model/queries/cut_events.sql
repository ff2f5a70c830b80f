-- cut_events (partial traces), the view events: the recorded events up to each shard's cut (shard_cut.cut,
-- the last analysed seq; null: the whole shard). See model/cut.py.
CREATE OR REPLACE VIEW events AS
SELECT e.* FROM recorded_events e JOIN shard_cut c ON c.shard = e.shard
WHERE c.cut IS NULL OR e.seq <= c.cut;
