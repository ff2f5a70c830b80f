-- read_predict: one row per (read event, slot) with a checksum, and what the data flow
-- predicts it holds: the latest local write before the read, or — when later — the latest
-- transfer into the slot layer not posted after the read, traced back to the checksum of
-- the latest write of its source slot that happens-before the post (whole-slot copies
-- only). checksum_mismatch reports the reads whose checksum differs; attribution
-- (analysis/attribution.py) searches for whose bytes they hold. Derived in
-- read_predict_ids (the rules are there), which stores the transfer's shard and the
-- prediction's source as small integers; this view gives the names back (id_names).
-- requires: read_predict_ids, id_names
-- Columns:
--   lk UBIGINT, seq BIGINT  -- the read (slot layer key and seq: one row of reads)
--   checksum UBIGINT    -- what the consumer saw
--   w_seq BIGINT, w_ck UBIGINT  -- the latest local write before the read
--   x_shard VARCHAR, x_post BIGINT  -- the latest transfer into the slot layer (its post)
--   via VARCHAR         -- 'write' | 'xfer' | null (nothing predicts it, or ambiguous)
--   predicted UBIGINT   -- the predicted checksum (null: no prediction)
--   is_stale BOOLEAN    -- the read saw the slot's earlier content or never-written poison
CREATE OR REPLACE VIEW read_predict AS
SELECT p.lk, p.seq, p.checksum, p.w_seq, p.w_ck, n.shards[p.x_sidx + 1] AS x_shard, p.x_post,
       CASE WHEN p.via_xfer THEN 'xfer' WHEN NOT p.via_xfer THEN 'write' END AS via, p.predicted, p.is_stale
FROM read_predict_ids p, id_names n;
