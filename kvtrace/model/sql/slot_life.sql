-- slot_life: alloc/free rows with reference counts (prefix sharing counts by reference).
-- Derived in slot_life_ids (the rules are there), which stores integer ids in place of the
-- shard, the agent and the kind; this view gives the names back (id_names).
-- requires: slot_life_ids, id_names
-- Columns: the slot_ev columns of alloc/free rows, plus
--   cnt_after BIGINT      -- holders of the slot (all requests) after this row
--   req_cnt_after BIGINT  -- references this request holds after this row
--   free_seq BIGINT       -- the request's next row of the slot when it is a free (its seq; null:
--                            the next is an alloc, or none): an alloc row's free, as holdings reads it
--                            (computed in the sort by hk req_cnt_after already makes)
CREATE OR REPLACE VIEW slot_life AS
SELECT n.shards[s.sidx + 1] AS shard, s.sidx, s.seq, n.agents[s.aid] AS agent,
       CASE WHEN s.alloc THEN 'alloc' ELSE 'free' END AS kind, s.request, s.pool, s.slot, s.page, s.shared,
       s.sk, s.hk, s.cnt_after, s.req_cnt_after, s.free_seq
FROM slot_life_ids s, id_names n;
