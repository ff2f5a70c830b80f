-- timeline_sorted: every event with its position `ord` in the timeline order (registered
-- Arrow table timeline_ord: shard, seq, ord) and, for a receive, the send it pairs with
-- (timeline_pairs: the pairs query), sorted by `ord`. Used when the index does not keep
-- the shards in seq order (order.py merges them otherwise).
-- Columns: ord (0..N-1, dense), every events column, pair_shard, pair_seq, pair_xfer
SELECT o.ord, e.*, p.send_shard AS pair_shard, p.send_seq AS pair_seq, p.send_xfer AS pair_xfer
FROM events e
JOIN timeline_ord o ON e.shard = o.shard AND e.seq = o.seq
LEFT JOIN timeline_pairs p ON e.shard = p.recv_shard AND e.seq = p.recv_seq
ORDER BY o.ord
