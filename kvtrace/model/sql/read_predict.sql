-- read_predict: one row per (read event, slot) with a checksum, and what the data flow
-- predicts it holds: the latest local write before the read, or — when later — the latest
-- transfer into the slot layer not posted after the read, traced back to the checksum of
-- the latest write of its source slot that happens-before the post (whole-slot copies
-- only). checksum_mismatch reports the reads whose checksum differs; attribution
-- (analysis/attribution.py) searches for whose bytes they hold.
-- requires: reads, writes, end_hold, poison, shards
-- Narrow: only the read's keys, its checksum and the prediction; join reads USING (lk, seq)
-- for the rest (checksum_mismatch does so for the few mismatched reads only).
-- Columns:
--   lk UBIGINT, seq BIGINT  -- the read (slot layer key and seq: one row of reads)
--   checksum UBIGINT    -- what the consumer saw
--   via VARCHAR         -- 'write' | 'xfer' | null (nothing predicts it, or ambiguous)
--   predicted UBIGINT   -- the predicted checksum (null: no prediction)
--   w_seq BIGINT, w_ck UBIGINT  -- the latest local write before the read
--   x_shard VARCHAR, x_post BIGINT  -- the latest transfer into the slot layer (its post)
--   is_stale BOOLEAN    -- the read saw the slot's earlier content or never-written poison
-- Cost: at 10M events every step here joins or groups ~7M rows, so each carries only the
-- integer columns it needs (a transfer end by (psidx, xfer, pos), its shard as psidx until
-- the end): as wide rows, string payloads in the hash tables spilled past the memory cap
-- and the joins and the group-by ran ~50x slower per row than at 1M.
CREATE OR REPLACE TABLE read_predict AS
WITH rk AS (SELECT lk, seq, gen_seq FROM reads WHERE checksum IS NOT NULL),
-- transfers into the read's slot layer, same generation
dst AS (
    SELECT psidx, xfer, pos, lk, gen_seq, post_seq, seen_seq, bound, off, nbytes, slot_bytes
    FROM end_hold WHERE side = 'dst' AND managed AND gen_seq IS NOT NULL
), src AS (
    SELECT psidx, xfer, pos, lk AS s_lk, bound AS s_bound, off AS s_off, slot_bytes AS s_slot_bytes
    FROM end_hold WHERE side = 'src'
), src_ck AS (
    SELECT d.*, s.s_off, s.s_slot_bytes, w.checksum AS x_ck
    FROM dst d JOIN src s USING (psidx, xfer, pos)
    ASOF LEFT JOIN writes w ON w.lk = s.s_lk AND s.s_bound >= w.seq
), x AS (
    SELECT rk.lk, rk.seq,   -- (slot layer key, seq) names the read's slot layer: integer group keys
           arg_max(t.x_ck, t.post_seq) AS x_ck,
           arg_max(CASE WHEN t.seen_seq <= rk.seq THEN t.seen_seq END, t.post_seq) AS x_seen,
           arg_max(t.bound, t.post_seq) AS x_bound,
           arg_max(t.off = 0 AND t.s_off = 0 AND t.nbytes = t.slot_bytes AND t.slot_bytes = t.s_slot_bytes, t.post_seq) AS whole,
           arg_max(t.psidx, t.post_seq) AS x_sidx, max(t.post_seq) AS x_post
    FROM rk JOIN src_ck t ON t.lk = rk.lk AND t.gen_seq = rk.gen_seq
    WHERE NOT rk.seq <= t.bound   -- the latest transfer into the slot not posted after the read
    GROUP BY ALL
), j AS (  -- with the latest local write before the read (precomputed in reads)
    SELECT r.lk, r.seq, r.checksum, r.gen_seq, r.lw_seq AS w_seq, r.lw_ck AS w_ck, x.x_ck, x.x_seen,
           x.x_bound, x.whole, xs.shard AS x_shard, x.x_post
    FROM reads r LEFT JOIN x USING (lk, seq) LEFT JOIN shards xs ON xs.sidx = x.x_sidx
    WHERE r.checksum IS NOT NULL
), p AS (
    SELECT *,
        CASE WHEN x_post IS NULL THEN (CASE WHEN w_seq > gen_seq OR gen_seq IS NULL THEN 'write' END)
             WHEN w_seq IS NULL OR w_seq <= gen_seq THEN 'xfer'
             WHEN w_seq >= x_seen THEN 'write'      -- the write follows the observed completion
             WHEN w_seq <= x_bound THEN 'xfer'      -- the write happens-before the post
             END AS via
    FROM j
)
SELECT p.* EXCLUDE (x_ck, x_seen, x_bound, whole, gen_seq),
       CASE WHEN via = 'write' THEN w_ck WHEN via = 'xfer' AND whole THEN x_ck END AS predicted,
       (checksum = w_ck AND via = 'xfer') OR checksum IN (SELECT checksum FROM poison) AS is_stale
FROM p;
