-- view reads: one row per (read event, slot) with the reader's holding of the slot
-- (the reader's latest alloc of it before the read on the same shard).
-- Columns:
--   shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR, layer INTEGER, slot BIGINT
--   page BIGINT, checksum UBIGINT   -- what the consumer saw
--   sk, lk UBIGINT                  -- join keys (see slot_ev)
--   alloc_seq, free_seq, gen_seq BIGINT  -- the reader's holding (null: it holds none)
--   managed BOOLEAN                 -- the pool has alloc events on that agent
CREATE OR REPLACE TEMP TABLE reads AS
WITH r AS (SELECT * FROM slot_ev WHERE kind = 'read')
SELECT r.shard, r.sidx, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, r.page, r.checksum, r.sk, r.lk,
       h.alloc_seq, h.free_seq, h.gen_seq, m.pool IS NOT NULL AS managed
FROM r ASOF LEFT JOIN holdings h ON h.hk = r.hk AND r.seq > h.alloc_seq
LEFT JOIN managed m ON m.agent = r.agent AND m.pool = r.pool;
