-- slot_xfers: the transfers whose descriptor ends touch one slot, either end, any layer.
-- Read from end_hold, the stored table with every column of the model's desc_end for each
-- posted transfer: desc_end is a view whose range join would run again on every click.
-- Parameters: agent, pool, slot
-- Columns: shard, xfer  (the initiator's shard and transfer id), into the temp table
--   tui_slot_xfers (filter_ords reads it)
CREATE OR REPLACE TEMP TABLE tui_slot_xfers AS
SELECT DISTINCT shard, xfer
FROM end_hold
WHERE agent = ?1 AND pool = ?2 AND slot <= ?3
  AND ?3 < slot + greatest(1, (off + nbytes + slot_bytes - 1) // slot_bytes)
