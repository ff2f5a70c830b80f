-- slot_life: alloc/free rows with reference counts (prefix sharing counts by reference).
-- requires: slot_ev
-- Columns: the slot_ev columns of alloc/free rows, plus
--   cnt_after BIGINT      -- holders of the slot (all requests) after this row
--   req_cnt_after BIGINT  -- references this request holds after this row
CREATE OR REPLACE TABLE slot_life AS
SELECT shard, sidx, seq, agent, kind, request, pool, slot, page, shared, sk, hk,
       sum(CASE kind WHEN 'alloc' THEN 1 ELSE -1 END) OVER (
           PARTITION BY sk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS cnt_after,
       sum(CASE kind WHEN 'alloc' THEN 1 ELSE -1 END) OVER (
           PARTITION BY hk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS req_cnt_after
FROM slot_ev WHERE kind IN ('alloc', 'free');
