-- slot_life: alloc/free rows with reference counts (prefix sharing counts by reference).
-- requires: slot_ev
-- Columns: the slot_ev columns of alloc/free rows, plus
--   cnt_after BIGINT      -- holders of the slot (all requests) after this row
--   req_cnt_after BIGINT  -- references this request holds after this row
--   free_seq BIGINT       -- the request's next row of the slot when it is a free (its seq; null:
--                            the next is an alloc, or none): an alloc row's free, as holdings reads it
--                            (computed here, in the sort req_cnt_after already makes)
CREATE OR REPLACE TABLE slot_life AS
SELECT shard, sidx, seq, agent, kind, request, pool, slot, page, shared, sk, hk,
       sum(CASE kind WHEN 'alloc' THEN 1 ELSE -1 END) OVER (
           PARTITION BY sk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS cnt_after,
       sum(CASE kind WHEN 'alloc' THEN 1 ELSE -1 END) OVER (
           PARTITION BY hk ORDER BY seq ROWS UNBOUNDED PRECEDING)::BIGINT AS req_cnt_after,
       CASE WHEN lead(kind) OVER (PARTITION BY hk ORDER BY seq) = 'free'
            THEN lead(seq) OVER (PARTITION BY hk ORDER BY seq) END AS free_seq
FROM slot_ev WHERE kind IN ('alloc', 'free');
