-- query live_window_delete_events: the watcher's window moved (kvtrace/model/live.py): delete
-- the events of shard ? that it no longer keeps (rows with no seq stay). _live_keep(k): the seqs it keeps.
DELETE FROM live_events
WHERE shard = ? AND seq IS NOT NULL AND seq NOT IN (SELECT k FROM _live_keep);
