-- writes: one row per (write event, slot): who filled which slot of which layer.
-- requires: slot_ev
-- Columns: shard VARCHAR, sidx INTEGER, seq BIGINT, agent, request, pool VARCHAR,
--   layer INTEGER, slot BIGINT, page BIGINT, checksum UBIGINT, src_request VARCHAR
--   sk, lk UBIGINT  -- join keys (see slot_ev)
CREATE OR REPLACE TABLE writes AS
SELECT shard, sidx, seq, agent, request, pool, layer, slot, page, checksum, src_request, sk, lk
FROM slot_ev WHERE kind = 'write';
