-- tl: the model's timeline under the short name the filters and the SQL console use
-- (every events column, ord, pair_shard, pair_seq, pair_xfer).
CREATE OR REPLACE VIEW tl AS SELECT * FROM timeline
