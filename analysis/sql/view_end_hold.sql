-- view end_hold: every descriptor end that lands in an allocator-managed pool, with the
-- transfer's post and the holding of the transfer's request that covers the post
-- (the latest alloc of that slot by the request that happens-before the post).
-- Columns:
--   shard, xfer, pos, side, agent, pool, layer, slot, off, nbytes, slot_bytes, dlist, idx
--   request VARCHAR, post_seq BIGINT, psidx INTEGER, know BIGINT[], op VARCHAR  -- from xfers
--   h_shard VARCHAR, h_sidx INTEGER -- the shard recording the slot's allocator events
--   alloc_seq, free_seq, release_seq, gen_seq BIGINT, page BIGINT  -- the holding (null: none)
CREATE OR REPLACE TEMP TABLE managed AS
SELECT DISTINCT shard AS h_shard, sidx AS h_sidx, agent, pool FROM slot_ev WHERE kind = 'alloc';

CREATE OR REPLACE TEMP TABLE end_hold AS
WITH e AS (
    SELECT d.shard, d.xfer, d.pos, d.side, d.agent, d.pool, d.layer, d.slot, d.off, d.nbytes,
           d.slot_bytes, d.dlist, d.idx, x.request, x.post_seq, x.sidx AS psidx, x.know, x.op,
           m.h_shard, m.h_sidx
    FROM desc_end d JOIN xfers x USING (shard, xfer)
    JOIN managed m ON m.agent = d.agent AND m.pool = d.pool
), c AS (
    SELECT e.shard, e.xfer, e.pos, e.side, arg_max(h.alloc_seq, h.alloc_seq) AS alloc_seq
    FROM e JOIN holdings h ON h.shard = e.h_shard AND h.agent = e.agent AND h.pool = e.pool
                          AND h.slot = e.slot AND h.request = e.request
    WHERE h.alloc_seq <= e.know[e.h_sidx + 1]
    GROUP BY ALL
)
SELECT e.*, h.free_seq, h.release_seq, h.gen_seq, h.page, c.alloc_seq
FROM e LEFT JOIN c USING (shard, xfer, pos, side)
LEFT JOIN holdings h ON h.shard = e.h_shard AND h.agent = e.agent AND h.pool = e.pool
                     AND h.slot = e.slot AND h.request = e.request AND h.alloc_seq = c.alloc_seq;
