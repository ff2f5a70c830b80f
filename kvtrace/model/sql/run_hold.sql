-- run_hold: further slots of descriptor ends spanning a run of slots (SGLang groups contiguous
-- pages into one descriptor): one row per (end, slot after its first), with the request's
-- holding of that slot as end_hold finds it for the first (h: null when it holds none)
-- requires: end_hold, holding_list
-- Columns: h_unknown BOOLEAN (as end_hold's, for this slot); the end's shard, xfer, pos, side, agent, pool, layer, request, post_seq, bound, seen_seq,
--   end_seq, h_shard, off, nbytes, slot_bytes; s0 BIGINT (its first slot), slot BIGINT (a further
--   slot), lk UBIGINT (see slot_ev), h STRUCT (the request's holding, as in holding_list; null: none)
CREATE OR REPLACE TABLE run_hold AS
WITH run AS (
    SELECT shard, xfer, pos, side, agent, pool, layer, request, post_seq, bound, seen_seq, end_seq, h_shard, h_blind, psidx,
           off, nbytes, slot_bytes, slot AS s0,
           unnest(range(slot + 1, slot + ((off + nbytes + slot_bytes - 1) // slot_bytes)::BIGINT)) AS slot
    FROM end_hold WHERE managed AND crosses
)
SELECT r.*, hash(r.h_shard, r.agent, r.pool, r.layer, r.slot) AS lk,
       list_filter(k.hl, lambda h: h.a <= r.bound)[-1] AS h,
       -- as end_hold's h_unknown, for this slot of the run
       coalesce(h IS NULL AND (r.request IS NULL OR r.h_blind OR r.h_shard IS DISTINCT FROM r.shard
                AND len(list_filter(k.hl, lambda h: h.a > r.bound AND (r.end_seq IS NULL OR h.a < r.end_seq))) > 0), false) AS h_unknown
FROM run r LEFT JOIN holding_list k ON k.shard = r.h_shard AND k.agent = r.agent AND k.pool = r.pool
                                   AND k.slot = r.slot AND k.request = r.request;
