-- reads: one row per (read event, slot) with the reader's holding of the slot
-- (the reader's latest alloc of it before the read on the same shard).
-- requires: slot_ev, holding_list, writes, managed
-- Columns:
--   shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR, layer INTEGER, slot BIGINT
--   page BIGINT, checksum UBIGINT   -- what the consumer saw
--   sk, lk UBIGINT                  -- join keys (see slot_ev)
--   alloc_seq, free_seq, gen_seq BIGINT  -- the reader's holding (null: it holds none)
--   managed BOOLEAN                 -- the pool has alloc events on that agent
--   lw_seq BIGINT, lw_ck UBIGINT, lw_req VARCHAR  -- the latest local write of the slot layer
--                                      before the read (null: none); computed once here,
--                                      several checks need it
-- Cost (10M events): the latest write is one ASOF LEFT JOIN of the read rows themselves to
-- the writes (their own columns only). Taking it on the distinct (slot layer, seq) pairs of
-- a second scan of the reads and joining it back by them cost a second scan, a group-by
-- and a hash join of ~7M rows each, more than sorting the wider rows once (~10% of reads).
CREATE OR REPLACE TABLE reads AS
WITH r AS (
    -- the holding: one hash join on hk to the request's holdings of the slot (a list ordered by
    -- alloc, almost always one), then the last alloc before the read (an ASOF join to holdings
    -- sorted every read by hk)
    SELECT r.shard, r.sidx, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, r.page, r.checksum, r.sk, r.lk,
           CASE WHEN len(k.hl) = 1 THEN CASE WHEN k.hl[1].a < r.seq THEN k.hl[1] END
                ELSE list_filter(k.hl, lambda h: h.a < r.seq)[-1] END AS h
    FROM (SELECT * FROM slot_ev WHERE kind = 'read') r LEFT JOIN holding_list k ON k.hk = r.hk
)
SELECT r.shard, r.sidx, r.seq, r.agent, r.request, r.pool, r.layer, r.slot, r.page, r.checksum, r.sk, r.lk,
       r.h.a AS alloc_seq, r.h.f AS free_seq, r.h.g AS gen_seq, m.pool IS NOT NULL AS managed,
       w.seq AS lw_seq, w.checksum AS lw_ck, w.request AS lw_req
FROM r ASOF LEFT JOIN (SELECT lk, seq, checksum, request FROM writes) w ON w.lk = r.lk AND r.seq > w.seq
LEFT JOIN managed m ON m.agent = r.agent AND m.pool = r.pool;
