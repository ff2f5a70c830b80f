-- cut_unpaired_recv: receives (notif_recv, msg_recv) with no send paired to them in
-- sync_pairs: their sender's facts are not in the trace.
-- Columns: shard VARCHAR, seq BIGINT, peer VARCHAR  -- the receive and who sent it
--   t_ns BIGINT  -- the receive's time on its shard's clock
SELECT e.shard, e.seq, e.peer, e.t_ns FROM events e
WHERE e.kind IN ('notif_recv', 'msg_recv')
  AND NOT EXISTS (SELECT 1 FROM sync_pairs p WHERE p.recv_shard = e.shard AND p.recv_seq = e.seq)
ORDER BY e.shard, e.seq;
