-- reads: one row per (read event, slot) with the reader's holding of the slot
-- (the reader's latest alloc of it before the read on the same shard).
-- requires: slot_ev, holdings, managed
-- Columns:
--   shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR, layer INTEGER, slot BIGINT
--   page BIGINT, checksum UBIGINT   -- what the consumer saw
--   sk, lk UBIGINT                  -- join keys (see slot_ev)
--   alloc_seq, free_seq, gen_seq BIGINT  -- the reader's holding (null: it holds none)
--   managed BOOLEAN                 -- the pool has alloc events on that agent
--   lw_seq BIGINT, lw_ck UBIGINT, lw_req VARCHAR  -- the latest local write of the slot layer
--                                      before the read (null: none); computed once here,
--                                      several checks need it
CREATE OR REPLACE TABLE reads AS
WITH r AS (SELECT * FROM slot_ev WHERE kind = 'read'),
lw AS (SELECT lk, seq AS w_seq, checksum AS w_ck, request AS w_req FROM slot_ev WHERE kind = 'write')
SELECT r.shard, r.sidx, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, r.page, r.checksum, r.sk, r.lk,
       h.alloc_seq, h.free_seq, h.gen_seq, m.pool IS NOT NULL AS managed,
       w.w_seq AS lw_seq, w.w_ck AS lw_ck, w.w_req AS lw_req
FROM r ASOF LEFT JOIN holdings h ON h.hk = r.hk AND r.seq > h.alloc_seq
ASOF LEFT JOIN lw w ON w.lk = r.lk AND r.seq > w.w_seq
LEFT JOIN managed m ON m.agent = r.agent AND m.pool = r.pool;
