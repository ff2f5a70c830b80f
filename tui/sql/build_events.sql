-- tui_events: every event of every shard with its position `ord` in one
-- happens-before-consistent total order, sorted by `ord`, so the timeline pages
-- by row-group pruning on `ord` instead of sorting 10M rows per page.
-- Columns: ord (0..N-1, dense), every events column, and
--   pair_shard, pair_seq, pair_xfer  for a receive: the send it pairs with (pairs.sql)
--   slot0                            the first slot of `slots` (for slot filters)
COPY (
    SELECT o.ord, e.*, p.send_shard AS pair_shard, p.send_seq AS pair_seq,
           p.send_xfer AS pair_xfer
    FROM events e
    JOIN tui_ord o ON e.shard = o.shard AND e.seq = o.seq
    LEFT JOIN tui_pairs p ON e.shard = p.shard AND e.seq = p.seq
    ORDER BY o.ord
) TO '{out}' (FORMAT parquet, ROW_GROUP_SIZE 8192, COMPRESSION zstd)
