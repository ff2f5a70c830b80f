-- dl_region: the regions of every prepared descriptor list, in list order, resolved
-- through layouts (a prepped list stacks (region, slot) entries; SGLang and vLLM index it
-- as region * num_slots + slot, which is only right when every region has that many slots).
-- requires: dlists, lay
-- Columns:
--   shard VARCHAR, dlist BIGINT  -- the list (recording shard, id)
--   agent VARCHAR                -- whose memory
--   region INTEGER               -- 0-based position of the region in the list
--   pool VARCHAR, layer INTEGER  -- what the region is (null: no layout covers it)
--   start_idx BIGINT, n BIGINT   -- first index and entry count of the region
--   num_slots BIGINT             -- the layout's slot count for the region
CREATE OR REPLACE TABLE dl_region AS
WITH d AS (
    SELECT d.shard, d.dlist, d.agent, d.idx, d.addr, l.pool, l.layer, l.addr AS l_addr, l.num_slots
    FROM dlists d LEFT JOIN lay l ON d.agent = l.agent AND d.addr >= l.addr AND d.addr < l.addr + l.nbytes
), g AS (
    SELECT shard, dlist, agent, pool, layer, l_addr, any_value(num_slots) AS num_slots,
           min(idx) AS start_idx, count(*) AS n
    FROM d GROUP BY ALL
)
SELECT shard, dlist, agent, (row_number() OVER (PARTITION BY shard, dlist ORDER BY start_idx) - 1)::INTEGER AS region,
       pool, layer, start_idx, n, num_slots
FROM g;
