-- slot_xfers: the transfers whose descriptor ends (the model's desc_end) touch one slot,
-- either end, any layer.
-- Parameters: agent, pool, slot
-- Columns: shard, xfer  (the initiator's shard and transfer id), into the temp table
--   tui_slot_xfers (filter_ords reads it)
CREATE OR REPLACE TEMP TABLE tui_slot_xfers AS
SELECT DISTINCT shard, xfer
FROM desc_end
WHERE agent = ?1 AND pool = ?2 AND slot <= ?3
  AND ?3 < slot + greatest(1, (off + nbytes + slot_bytes - 1) // slot_bytes)
