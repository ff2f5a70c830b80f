-- inflight: transfers posted at or before the cursor and not yet seen to end there
-- (no xfer_done/xfer_error/xfer_release by the initiator, no paired notification),
-- with the slots of one (agent, pool) their descriptor ends read from or write into (from
-- end_hold, the stored table with desc_end's columns per posted transfer; desc_end is a view).
-- Parameters: ord, agent, pool
-- Columns: shard, xfer, request, dir ('out': bytes leave the slot; 'in': land in it),
--          slot, layer
WITH live AS (
    SELECT shard, xfer, request FROM xfer_span
    WHERE post_ord <= ?1 AND (end_ord IS NULL OR end_ord > ?1)
)
SELECT DISTINCT e.shard, e.xfer, live.request, CASE e.side WHEN 'src' THEN 'out' ELSE 'in' END AS dir,
       e.slot, e.layer
FROM end_hold e JOIN live USING (shard, xfer)
WHERE e.agent = ?2 AND e.pool = ?3
ORDER BY e.slot
