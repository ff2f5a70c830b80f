-- query live_window_delete_descs: the watcher's window moved (kvtrace/model/live.py): delete
-- the descriptor rows of shard ? whose posting it no longer keeps. _live_keep(k): the xfers
-- of the rows it keeps (with those whose posting is not loaded yet); rows with no xfer stay.
DELETE FROM live_descs
WHERE shard = ? AND xfer IS NOT NULL AND xfer NOT IN (SELECT k FROM _live_keep);
