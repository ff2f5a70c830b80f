-- reads: one row per (read event, slot) with the reader's holding of the slot
-- (the reader's latest alloc of it before the read on the same shard). Derived in reads_ids
-- (the rules are there), which stores the shard and the agent as integer ids; this view
-- gives the names back (id_names), so a reader pays for a name only where it reads it.
-- requires: reads_ids, id_names
-- Columns:
--   shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR, layer INTEGER, slot BIGINT
--   page BIGINT, checksum UBIGINT   -- what the consumer saw
--   sk, lk UBIGINT                  -- join keys (see slot_ev)
--   alloc_seq, free_seq, gen_seq BIGINT  -- the reader's holding (null: it holds none)
--   managed BOOLEAN                 -- the pool has alloc events on that agent
--   lw_seq BIGINT, lw_ck UBIGINT, lw_req VARCHAR  -- the latest local write of the slot layer
--                                      before the read (null: none); computed once in
--                                      reads_ids, several checks need it
CREATE OR REPLACE VIEW reads AS
SELECT n.shards[r.sidx + 1] AS shard, r.sidx, r.seq, n.agents[r.aid] AS agent, r.request, r.pool, r.layer,
       r.slot, r.page, r.checksum, r.sk, r.lk, r.alloc_seq, r.free_seq, r.gen_seq, r.managed,
       r.lw_seq, r.lw_ck, r.lw_req
FROM reads_ids r, id_names n;
