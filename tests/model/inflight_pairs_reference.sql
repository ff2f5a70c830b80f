-- The reference rule of inflight_pairs (was kvtrace/model/sql/inflight_pairs.sql; now
-- built in numpy by kvtrace/model/inflight.py): test_inflight.py checks both agree.
-- inflight_pairs: pairs of descriptor ends of two different transfers that overlap in
-- bytes on the same agent and are in flight at the same time (neither transfer is known
-- to have ended — done, error or notification — before the other was posted).
-- Candidates: per agent and 64 KiB address bucket, ends sorted by (addr, post time); each
-- end is compared with its next 4 neighbours in that order (a linear-cost sweep; t_ns only
-- orders candidates, happens-before decides). Overlaps further apart than 4 neighbours, or
-- across a bucket boundary, are not examined.
-- requires: end_hold, xfer_seen
-- Columns:
--   agent VARCHAR
--   a_shard, a_xfer, a_side, a_request, a_post  -- the earlier-sorted end
--   b_shard, b_xfer, b_side, b_request, b_post  -- the later-sorted end
--   pool VARCHAR, layer INTEGER, slot BIGINT     -- where (from a's layout position)
--   lo UBIGINT, hi UBIGINT                       -- overlapping byte range
--   a_pos, b_pos INTEGER                         -- each end's descriptor position
CREATE OR REPLACE TABLE inflight_pairs_ref AS
WITH e AS (
    SELECT e.*, addr // 65536 AS bucket,
           row_number() OVER (PARTITION BY agent, addr // 65536 ORDER BY addr, t_ns, shard, post_seq, pos, side) AS rn
    FROM end_hold e
), p AS (
    SELECT a.agent, a.shard AS a_shard, a.xfer AS a_xfer, a.side AS a_side, a.request AS a_request,
           a.post_seq AS a_post, a.psidx AS a_sidx,
           b.shard AS b_shard, b.xfer AS b_xfer, b.side AS b_side, b.request AS b_request,
           b.post_seq AS b_post, b.psidx AS b_sidx,
           a.pool, a.layer, a.slot, greatest(a.addr, b.addr) AS lo, least(a.addr + a.nbytes, b.addr + b.nbytes) AS hi,
           a.pos AS a_pos, b.pos AS b_pos
    FROM (SELECT *, rn + unnest([1, 2, 3, 4]) AS nb FROM e) a
    JOIN e b ON a.agent = b.agent AND a.bucket = b.bucket AND b.rn = a.nb   -- equi-join: linear
    WHERE b.addr < a.addr + a.nbytes AND a.addr < b.addr + b.nbytes
      AND NOT (a.shard = b.shard AND a.xfer = b.xfer)
)
SELECT p.* EXCLUDE (a_sidx, b_sidx)
FROM p
LEFT JOIN xfer_seen sa ON sa.shard = p.a_shard AND sa.xfer = p.a_xfer AND sa.side_sidx = p.b_sidx
LEFT JOIN xfer_seen sb ON sb.shard = p.b_shard AND sb.xfer = p.b_xfer AND sb.side_sidx = p.a_sidx
WHERE NOT coalesce(sa.end_seq <= p.b_post, false)   -- a not known over when b is posted
  AND NOT coalesce(sb.end_seq <= p.a_post, false);  -- b not known over when a is posted
