-- read_predict: one row per (read event, slot) with a checksum, and what the data flow
-- predicts it holds: the latest local write before the read, or — when later — the latest
-- transfer into the slot layer not posted after the read, traced back to the checksum of
-- the latest write of its source slot that happens-before the post (whole-slot copies
-- only). checksum_mismatch reports the reads whose checksum differs; attribution
-- (analysis/attribution.py) searches for whose bytes they hold.
-- requires: reads, writes, end_hold, poison
-- Columns: every column of reads, and
--   via VARCHAR         -- 'write' | 'xfer' | null (nothing predicts it, or ambiguous)
--   predicted UBIGINT   -- the predicted checksum (null: no prediction)
--   w_seq BIGINT, w_ck UBIGINT  -- the latest local write before the read
--   x_shard VARCHAR, x_post BIGINT  -- the latest transfer into the slot layer (its post)
--   is_stale BOOLEAN    -- the read saw the slot's earlier content or never-written poison
CREATE OR REPLACE TABLE read_predict AS
WITH r AS (SELECT * FROM reads WHERE checksum IS NOT NULL),
lw AS (SELECT lk, seq AS w_seq, checksum AS w_ck FROM writes),
-- transfers into the read's slot layer, same generation
dst AS (
    SELECT e.*, s.agent AS s_agent, s.pool AS s_pool, s.layer AS s_layer, s.slot AS s_slot,
           s.lk AS s_lk, s.bound AS s_bound, s.off AS s_off, s.slot_bytes AS s_slot_bytes
    FROM end_hold e JOIN end_hold s ON s.shard = e.shard AND s.xfer = e.xfer AND s.pos = e.pos AND s.side = 'src'
    WHERE e.side = 'dst' AND e.managed AND e.gen_seq IS NOT NULL
), src_ck AS (
    SELECT dst.*, w.w_ck AS x_ck FROM dst ASOF LEFT JOIN lw w ON w.lk = dst.s_lk AND dst.s_bound >= w.w_seq
), x AS (
    SELECT r.lk, r.seq,   -- (slot layer key, seq) names the read's slot layer: integer group keys
           arg_max(t.x_ck, t.post_seq) AS x_ck,
           arg_max(CASE WHEN t.seen_seq <= r.seq THEN t.seen_seq END, t.post_seq) AS x_seen,
           arg_max(t.bound, t.post_seq) AS x_bound,
           arg_max(t.off = 0 AND t.s_off = 0 AND t.nbytes = t.slot_bytes AND t.slot_bytes = t.s_slot_bytes, t.post_seq) AS whole,
           arg_max(t.shard, t.post_seq) AS x_shard, max(t.post_seq) AS x_post
    FROM r JOIN src_ck t ON t.lk = r.lk AND t.gen_seq = r.gen_seq
    WHERE NOT r.seq <= t.bound   -- the latest transfer into the slot not posted after the read
    GROUP BY ALL
), j AS (  -- with the latest local write before the read (precomputed in reads)
    SELECT r.*, r.lw_seq AS w_seq, r.lw_ck AS w_ck, x.x_ck, x.x_seen, x.x_bound, x.whole, x.x_shard, x.x_post
    FROM r LEFT JOIN x USING (lk, seq)
), p AS (
    SELECT *,
        CASE WHEN x_post IS NULL THEN (CASE WHEN w_seq > gen_seq OR gen_seq IS NULL THEN 'write' END)
             WHEN w_seq IS NULL OR w_seq <= gen_seq THEN 'xfer'
             WHEN w_seq >= x_seen THEN 'write'      -- the write follows the observed completion
             WHEN w_seq <= x_bound THEN 'xfer'      -- the write happens-before the post
             END AS via
    FROM j
)
SELECT p.* EXCLUDE (x_ck, x_seen, x_bound, whole),
       CASE WHEN via = 'write' THEN w_ck WHEN via = 'xfer' AND whole THEN x_ck END AS predicted,
       (checksum = w_ck AND via = 'xfer') OR checksum IN (SELECT checksum FROM poison) AS is_stale
FROM p;
