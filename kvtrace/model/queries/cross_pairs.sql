-- cross_pairs: the send → receive pairs between different shards (the edges vector clocks need).
-- Columns: send_sidx INTEGER, send_seq BIGINT, recv_sidx INTEGER, recv_seq BIGINT
SELECT send_sidx, send_seq, recv_sidx, recv_seq FROM sync_pairs WHERE send_sidx <> recv_sidx
