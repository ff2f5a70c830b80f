-- hb: macro hb(x_sidx, x_seq, know): event (x_sidx, x_seq) happens-before the event whose
-- knowledge vector is `know` (0-based shard index; know[j+1] is the largest seq of shard j
-- it knows; see xfers.know and clocks.vc).
-- requires:
CREATE OR REPLACE MACRO hb(x_sidx, x_seq, know) AS coalesce(x_seq <= know[x_sidx + 1], false);
