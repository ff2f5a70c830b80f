-- slot_history: the holdings (one per alloc: a request holding a slot until its free) with
-- the timeline positions of the alloc and the free, so who holds a slot at any moment of
-- the timeline is one range test.
-- requires: holdings, timeline
-- Columns: agent, pool VARCHAR, slot BIGINT, request VARCHAR, shared BOOLEAN,
--   alloc_ord BIGINT, free_ord BIGINT (null: never freed)
CREATE OR REPLACE TABLE slot_history AS
SELECT h.agent, h.pool, h.slot, h.request, h.shared, a.ord AS alloc_ord, f.ord AS free_ord
FROM holdings h
JOIN timeline a ON a.shard = h.shard AND a.seq = h.alloc_seq
LEFT JOIN timeline f ON f.shard = h.shard AND f.seq = h.free_seq;
