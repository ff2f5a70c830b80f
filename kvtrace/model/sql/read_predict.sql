-- read_predict: one row per (read event, slot) with a checksum, and what the data flow
-- predicts it holds: the latest local write before the read, or — when later — the latest
-- transfer into the slot layer not posted after the read, traced back to the checksum of
-- the latest write of its source slot that happens-before the post (whole-slot copies
-- only). checksum_mismatch reports the reads whose checksum differs; attribution
-- (analysis/attribution.py) searches for whose bytes they hold.
-- requires: reads, writes, end_hold_ids, poison, shards
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
-- "The latest transfer" of a read: among the transfers into its slot layer in its holding's
-- generation whose post the read does not happen-before (bound < the read's seq), each of
-- its values is arg_max(value, post_seq) — the value of the latest post among those where
-- the value is not null (DuckDB's arg_max skips null values).
-- Cost: at 10M events every step here joins ~7M rows, so each carries only the integer
-- columns it needs. Almost every slot layer generation receives one transfer: then a read
-- matches at most one, and arg_max over that one row is the row's value where post_seq is
-- not null. So the generations with more than one transfer (multi, by a hash of their key:
-- a collision only sends a generation down the exact general path) take the general join
-- + group-by per read (xm), and every other read takes its one transfer by a hash join (t1);
-- the group-by over every read cost ~5 s of the ~8 s at 10M. The source end's checksum is
-- found by an ASOF join on the source ends alone (7 integer columns), before they meet
-- their destination ends. The ends come from end_hold_ids (integers only: no name is read).
CREATE OR REPLACE TABLE read_predict AS
WITH dst AS NOT MATERIALIZED (   -- transfers into a held slot layer: the generation they write
    SELECT psidx, xfer, pos, lk, gen_seq, post_seq, seen_seq, bound, off, nbytes, slot_bytes
    FROM end_hold_ids WHERE dst AND managed AND gen_seq IS NOT NULL
), src AS NOT MATERIALIZED (
    SELECT psidx, xfer, pos, lk, bound, off, slot_bytes FROM end_hold_ids WHERE NOT dst
), multi AS (   -- slot layer generations with more than one transfer in (rare), by hash
    SELECT hash(lk, gen_seq) AS h FROM dst GROUP BY h HAVING count(*) > 1
), sck AS NOT MATERIALIZED (   -- each source end with the checksum of the latest write of its
    -- slot layer that happens-before the post
    SELECT s.psidx, s.xfer, s.pos, s.off AS s_off, s.slot_bytes AS s_slot_bytes, w.checksum AS x_ck
    FROM src s ASOF LEFT JOIN writes w ON w.lk = s.lk AND s.bound >= w.seq
), t1 AS (   -- the transfer of each generation that receives one
    SELECT d.lk, d.gen_seq, d.post_seq, d.seen_seq, d.bound, d.psidx, s.x_ck,
           d.off = 0 AND s.s_off = 0 AND d.nbytes = d.slot_bytes AND d.slot_bytes = s.s_slot_bytes AS whole
    FROM (SELECT * FROM dst WHERE hash(lk, gen_seq) NOT IN (SELECT h FROM multi)) d
    JOIN sck s USING (psidx, xfer, pos)
), tm AS (   -- the transfers of the generations that receive several (their source writes
    -- looked up among the writes of their source slot layers only)
    SELECT d.lk, d.gen_seq, d.post_seq, d.seen_seq, d.bound, d.psidx, w.checksum AS x_ck,
           d.off = 0 AND s.off = 0 AND d.nbytes = d.slot_bytes AND d.slot_bytes = s.slot_bytes AS whole
    FROM (SELECT * FROM dst WHERE hash(lk, gen_seq) IN (SELECT h FROM multi)) d
    JOIN src s USING (psidx, xfer, pos)
    ASOF LEFT JOIN (SELECT lk, seq, checksum FROM writes WHERE lk IN (
                        SELECT s.lk FROM (SELECT * FROM dst WHERE hash(lk, gen_seq) IN (SELECT h FROM multi)) d
                        JOIN src s USING (psidx, xfer, pos))) w
        ON w.lk = s.lk AND s.bound >= w.seq
), xm AS (   -- per read of such a generation: its latest transfer not posted after the read
    SELECT rk.lk, rk.seq,   -- (slot layer key, seq) names the read's slot layer: integer group keys
           arg_max(t.x_ck, t.post_seq) AS x_ck,
           arg_max(CASE WHEN t.seen_seq <= rk.seq THEN t.seen_seq END, t.post_seq) AS x_seen,
           arg_max(t.bound, t.post_seq) AS x_bound,
           arg_max(t.whole, t.post_seq) AS whole,
           arg_max(t.psidx, t.post_seq) AS x_sidx, max(t.post_seq) AS x_post
    FROM (SELECT lk, seq, gen_seq FROM reads
          WHERE checksum IS NOT NULL AND hash(lk, gen_seq) IN (SELECT h FROM multi)) rk
    JOIN tm t ON t.lk = rk.lk AND t.gen_seq = rk.gen_seq
    WHERE NOT rk.seq <= t.bound   -- the latest transfer into the slot not posted after the read
    GROUP BY ALL
), j AS (  -- with the latest local write before the read (precomputed in reads); a read
    -- matches a row of t1 (at most one: its generation receives one transfer) or of xm
    SELECT r.lk, r.seq, r.checksum, r.gen_seq, r.lw_seq AS w_seq, r.lw_ck AS w_ck,
           coalesce(xm.x_ck, CASE WHEN o.post_seq IS NOT NULL THEN o.x_ck END) AS x_ck,
           coalesce(xm.x_seen, CASE WHEN o.post_seq IS NOT NULL AND o.seen_seq <= r.seq THEN o.seen_seq END) AS x_seen,
           coalesce(xm.x_bound, CASE WHEN o.post_seq IS NOT NULL THEN o.bound END) AS x_bound,
           coalesce(xm.whole, CASE WHEN o.post_seq IS NOT NULL THEN o.whole END) AS whole,
           coalesce(xm.x_sidx, CASE WHEN o.post_seq IS NOT NULL THEN o.psidx END) AS x_sidx,
           coalesce(xm.x_post, o.post_seq) AS x_post
    FROM reads r
    LEFT JOIN t1 o ON o.lk = r.lk AND o.gen_seq = r.gen_seq AND o.bound < r.seq
    LEFT JOIN xm ON xm.lk = r.lk AND xm.seq = r.seq
    WHERE r.checksum IS NOT NULL
), p AS (
    SELECT j.* EXCLUDE (x_sidx), xs.shard AS x_shard,
        CASE WHEN x_post IS NULL THEN (CASE WHEN w_seq > gen_seq OR gen_seq IS NULL THEN 'write' END)
             WHEN w_seq IS NULL OR w_seq <= gen_seq THEN 'xfer'
             WHEN w_seq >= x_seen THEN 'write'      -- the write follows the observed completion
             WHEN w_seq <= x_bound THEN 'xfer'      -- the write happens-before the post
             END AS via
    FROM j LEFT JOIN shards xs ON xs.sidx = j.x_sidx
)
SELECT lk, seq, checksum, w_seq, w_ck, x_shard, x_post, via,
       CASE WHEN via = 'write' THEN w_ck WHEN via = 'xfer' AND whole THEN x_ck END AS predicted,
       (checksum = w_ck AND via = 'xfer') OR checksum IN (SELECT checksum FROM poison) AS is_stale
FROM p;
