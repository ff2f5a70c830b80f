-- read_predict_ids: one row per (read event, slot) with a checksum, and what the data flow
-- predicts it holds: the latest local write before the read, or — when later — the latest
-- transfer into the slot layer not posted after the read, traced back to the checksum of
-- the latest write of its source slot that happens-before the post (whole-slot copies
-- only: one descriptor per slot, or a coalesced run of whole slots). checksum_mismatch
-- reports the reads whose checksum differs; attribution (analysis/attribution.py) searches
-- for whose bytes they hold.
-- requires: reads_ids, writes_ids, desc_hold_ids, run_hold, poison, xfers
-- (reads_ids, writes_ids: the integer tables behind the views reads, writes.)
-- Narrow: only the read's keys, its checksum and the prediction; join reads USING (lk, seq)
-- for the rest (checksum_mismatch does so for the few mismatched reads only).
-- Stored narrow: the transfer's shard as its index and the prediction's source as a boolean
-- (6.8M rows at 10M events: its two text columns cost ~0.7 cpu-s to write); the view read_predict
-- gives the names back (id_names). Columns: read_predict's, with x_sidx INTEGER (shards.sidx) for
-- x_shard and via_xfer BOOLEAN (true: 'xfer', false: 'write', null: null) for via:
--   lk UBIGINT, seq BIGINT  -- the read (slot layer key and seq: one row of reads)
--   checksum UBIGINT    -- what the consumer saw
--   w_seq BIGINT, w_ck UBIGINT  -- the latest local write before the read
--   x_sidx INTEGER, x_post BIGINT  -- the latest transfer into the slot layer (its post)
--   via_xfer BOOLEAN    -- the prediction comes from the transfer (true), the write (false), nothing (null)
--   predicted UBIGINT   -- the predicted checksum (null: no prediction)
--   is_stale BOOLEAN    -- the read saw the slot's earlier content or never-written poison
-- "The latest transfer" of a read: among the transfers into its slot layer in its holding's
-- generation whose post the read does not happen-before (bound < the read's seq), the one
-- every other happens-before (posts of one shard in seq order, of two shards by xfers.know);
-- where two are concurrent there is none, and the transfer's prediction is not made.
-- Cost: at 10M events every step here joins ~7M rows, so each carries only the integer
-- columns it needs. Almost every slot layer generation receives one transfer: then a read
-- matches at most one, and arg_max over that one row is the row's value where post_seq is
-- not null. So the generations with more than one transfer (multi, by a hash of their key:
-- a collision only sends a generation down the exact general path) take the general join
-- + group-by per read (xm), and every other read takes its one transfer by a hash join (t1);
-- the group-by over every read cost ~5 s of the ~8 s at 10M. The two ends of a transfer's
-- descriptors come side by side from desc_hold_ids (integers only: no name is read), so the
-- source end's checksum is found by an ASOF join on the descriptors into held slot layers
-- alone, with no join of destination ends to source ends (at 10M that join and an ASOF join
-- over every source end cost ~6 of this object's ~13 cpu-s).
CREATE OR REPLACE TABLE read_predict_ids AS
WITH runs AS MATERIALIZED (   -- coalesced runs (SGLang's generic path: contiguous pages as one
    -- descriptor per layer) of whole slots back to back on both sides: the run's later slots
    -- as run_hold derives them (one row per end and slot after its first, keyed as slot_ev
    -- keys it, with the request's holding of that slot), each destination slot paired with
    -- the source slot at the same distance from the run's start
    SELECT d.lk, d.h.g AS gen_seq, d.post_seq, d.seen_seq, d.bound, d.psidx, true AS whole,
           s.lk AS s_lk, s.bound AS s_bound, true AS s_first
    FROM run_hold d JOIN run_hold s
      ON s.shard = d.shard AND s.xfer = d.xfer AND s.pos = d.pos AND s.slot - s.s0 = d.slot - d.s0
    WHERE d.side = 'dst' AND s.side = 'src' AND d.off = 0 AND s.off = 0 AND d.slot_bytes = s.slot_bytes
      AND d.nbytes % d.slot_bytes = 0 AND d.h IS NOT NULL
), pair AS NOT MATERIALIZED (   -- the descriptors of those transfers, both ends side by side
    SELECT d_lk AS lk, d_gen_seq AS gen_seq, post_seq, d_seen_seq AS seen_seq, d_bound AS bound, psidx,
           -- (a run's first slot: whole too; its later slots come from runs)
           d_off = 0 AND s_off = 0 AND nbytes % d_slot_bytes = 0 AND d_slot_bytes = s_slot_bytes AS whole,
           s_lk, s_bound, s_first
    FROM desc_hold_ids WHERE d_managed AND d_gen_seq IS NOT NULL
    UNION ALL SELECT * FROM runs
), multi AS (   -- slot layer generations with more than one transfer in (rare), by hash: every
    -- generation of an alloc (gen_seq) where one slot layer receives more than one (a superset:
    -- the other slot layers of that alloc take the exact general path too). Grouped by the alloc
    -- (~16 slot layers each at 10M: 0.4M small groups) instead of by each generation (6.8M
    -- groups of one): 0.99-1.09 vs 1.16-1.59 cpu-s at 10M (bench/results/checks.txt)
    SELECT unnest(list(hash(lk, gen_seq))) AS h FROM pair WHERE s_first GROUP BY gen_seq
    HAVING len(list_distinct(list(lk))) < count(*)
), t1 AS (   -- the transfer of each generation that receives one, with the checksum of the
    -- latest write of its source slot layer that happens-before the post
    SELECT p.lk, p.gen_seq, p.post_seq, p.seen_seq, p.bound, p.psidx, w.checksum AS x_ck, p.whole
    FROM (SELECT * FROM pair WHERE hash(lk, gen_seq) NOT IN (SELECT h FROM multi)) p
    ASOF LEFT JOIN writes_ids w ON w.lk = p.s_lk AND p.s_bound >= w.seq
), tm AS (   -- the transfers of the generations that receive several (their source writes
    -- looked up among the writes of their source slot layers only), with what each post
    -- knows of every shard (xfers.know: the happens-before order of posts of two shards)
    SELECT p.lk, p.gen_seq, p.post_seq, p.seen_seq, p.bound, p.psidx, x.know, w.checksum AS x_ck, p.whole
    FROM (SELECT * FROM pair WHERE hash(lk, gen_seq) IN (SELECT h FROM multi)) p
    JOIN xfers x ON x.sidx = p.psidx AND x.post_seq = p.post_seq
    ASOF LEFT JOIN (SELECT lk, seq, checksum FROM writes_ids WHERE lk IN (
                        SELECT s_lk FROM pair WHERE hash(lk, gen_seq) IN (SELECT h FROM multi))) w
        ON w.lk = p.s_lk AND p.s_bound >= w.seq
), xc AS (   -- per read of such a generation: the transfers into the slot not posted after the read
    SELECT rk.lk, rk.seq,   -- (slot layer key, seq) names the read's slot layer: integer group keys
           t.psidx, t.post_seq, t.know, t.x_ck, t.whole, t.bound,
           CASE WHEN t.seen_seq <= rk.seq THEN t.seen_seq END AS seen
    FROM (SELECT lk, seq, gen_seq FROM reads_ids
          WHERE checksum IS NOT NULL AND hash(lk, gen_seq) IN (SELECT h FROM multi)) rk
    JOIN tm t ON t.lk = rk.lk AND t.gen_seq = rk.gen_seq
    WHERE NOT rk.seq <= t.bound
), xl AS (   -- of those, the latest: the one every other happens-before (one shard's posts by
    -- its seqs; two shards' only by happens-before, never by comparing their seqs). None
    -- when two are concurrent: which bytes the slot holds is then not predicted.
    SELECT c.* FROM xc c
    WHERE NOT EXISTS (SELECT 1 FROM xc u WHERE u.lk = c.lk AND u.seq = c.seq
                      AND NOT CASE WHEN u.psidx = c.psidx THEN u.post_seq <= c.post_seq
                                   ELSE coalesce(u.post_seq <= c.know[u.psidx + 1], false) END)
), xg AS (   -- the latest transfer's descriptors into the slot layer (one transfer: a post
    -- happens-before another only when it is another)
    SELECT lk, seq, min(x_ck) AS x_ck, count(DISTINCT x_ck) <= 1 AND bool_and(whole) AS whole,
           min(seen) AS x_seen, min(bound) AS x_bound
    FROM xl GROUP BY lk, seq
), xm AS (   -- per read: the latest transfer's values, or none; a transfer is there either way
    -- (x_sidx, x_post name the latest, else the largest (seq, shard) for a stable name)
    SELECT c.lk, c.seq, g.x_ck, g.x_seen, g.x_bound, g.whole,
           coalesce(any_value(l.psidx), max({'p': c.post_seq, 's': c.psidx}).s) AS x_sidx,
           coalesce(any_value(l.post_seq), max({'p': c.post_seq, 's': c.psidx}).p) AS x_post
    FROM xc c LEFT JOIN xg g USING (lk, seq) LEFT JOIN xl l USING (lk, seq)
    GROUP BY c.lk, c.seq, g.x_ck, g.x_seen, g.x_bound, g.whole
), j AS (  -- with the latest local write before the read (precomputed in reads); a read
    -- matches a row of t1 (at most one: its generation receives one transfer) or of xm
    SELECT r.lk, r.seq, r.checksum, r.gen_seq, r.lw_seq AS w_seq, r.lw_ck AS w_ck,
           coalesce(xm.x_ck, CASE WHEN o.post_seq IS NOT NULL THEN o.x_ck END) AS x_ck,
           coalesce(xm.x_seen, CASE WHEN o.post_seq IS NOT NULL AND o.seen_seq <= r.seq THEN o.seen_seq END) AS x_seen,
           coalesce(xm.x_bound, CASE WHEN o.post_seq IS NOT NULL THEN o.bound END) AS x_bound,
           coalesce(xm.whole, CASE WHEN o.post_seq IS NOT NULL THEN o.whole END) AS whole,
           coalesce(xm.x_sidx, CASE WHEN o.post_seq IS NOT NULL THEN o.psidx END) AS x_sidx,
           coalesce(xm.x_post, o.post_seq) AS x_post
    FROM reads_ids r
    LEFT JOIN t1 o ON o.lk = r.lk AND o.gen_seq = r.gen_seq AND o.bound < r.seq
    LEFT JOIN xm ON xm.lk = r.lk AND xm.seq = r.seq
    WHERE r.checksum IS NOT NULL
), p AS (
    SELECT j.*,
        CASE WHEN x_post IS NULL THEN (CASE WHEN w_seq > gen_seq OR gen_seq IS NULL THEN 'write' END)
             WHEN w_seq IS NULL OR w_seq <= gen_seq THEN 'xfer'
             WHEN w_seq >= x_seen THEN 'write'      -- the write follows the observed completion
             WHEN w_seq <= x_bound THEN 'xfer'      -- the write happens-before the post
             END AS via
    FROM j
)
SELECT lk, seq, checksum, w_seq, w_ck, x_sidx, x_post, via = 'xfer' AS via_xfer,
       CASE WHEN via = 'write' THEN w_ck WHEN via = 'xfer' AND whole THEN x_ck END AS predicted,
       (checksum = w_ck AND via = 'xfer') OR checksum IN (SELECT checksum FROM poison) AS is_stale
FROM p;
