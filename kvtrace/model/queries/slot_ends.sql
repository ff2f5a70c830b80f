-- slot_ends: the descriptor ends that lie within one slot of a layout region without a K/V
-- part (desc_end), for readers that work per slot.
-- Columns: shard VARCHAR, xfer BIGINT, pos INTEGER, side VARCHAR, pool VARCHAR, layer INTEGER,
--   slot BIGINT, off BIGINT
SELECT shard, xfer, pos, side, pool, layer, slot, off
FROM desc_end WHERE pool IS NOT NULL AND part IS NULL AND NOT crosses
