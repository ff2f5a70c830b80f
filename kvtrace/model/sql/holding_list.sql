-- holding_list: each request's holdings of each slot as one list (almost always one element),
-- so end_hold, run_hold and reads look a holding up with one equi-join, not a join + group-by + join back
-- (reads and end_hold by the integer key hk: a hash join on it instead of four strings and the
-- slot, and for reads instead of an ASOF join that sorts every read)
-- requires: holdings
-- Columns: shard, agent, pool VARCHAR, slot BIGINT, request VARCHAR,
--   hk UBIGINT                         -- join key of (shard, agent, pool, slot, request) (see slot_ev)
--   hl STRUCT(a, f, r, g, p BIGINT)[]  -- (alloc, free, release, generation seq, page) by alloc
CREATE OR REPLACE TABLE holding_list AS
SELECT shard, agent, pool, slot, request, hk,
       -- list_sort orders the structs by their first field, the alloc's seq: ~3x faster
       -- than an ordered aggregate here (one tiny list per group)
       list_sort(list({'a': alloc_seq, 'f': free_seq, 'r': release_seq, 'g': gen_seq, 'p': page})) AS hl
FROM holdings GROUP BY ALL;
