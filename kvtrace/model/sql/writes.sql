-- writes: one row per (write event, slot): who filled which slot of which layer.
-- Derived in writes_ids (the rule is there), which stores the shard and the agent as
-- integer ids; this view gives the names back (id_names), so a reader pays for a name only
-- where it reads it.
-- requires: writes_ids, id_names
-- Columns: shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR,
--   layer INTEGER, slot BIGINT, page BIGINT, checksum UBIGINT, src_request VARCHAR
--   sk, lk UBIGINT  -- join keys (see slot_ev)
CREATE OR REPLACE VIEW writes AS
SELECT n.shards[w.sidx + 1] AS shard, w.sidx, w.seq, n.agents[w.aid] AS agent, w.request, w.pool, w.layer,
       w.slot, w.page, w.checksum, w.src_request, w.sk, w.lk
FROM writes_ids w, id_names n;
