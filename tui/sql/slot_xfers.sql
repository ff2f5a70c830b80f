-- slot_xfers: the transfers whose descriptors touch one slot, either end.
-- Parameters: agent, pool, slot (the slot's (agent, pool) and number; every layer).
-- Columns: shard, xfer  (the initiator's shard and transfer id)
WITH region AS (
    SELECT agent, addr + ?3 * slot_bytes AS lo, addr + (?3 + 1) * slot_bytes AS hi
    FROM layouts WHERE agent = ?1 AND pool = ?2
)
SELECT DISTINCT d.shard, d.xfer
FROM descs d JOIN region r
  ON (d.src_agent = r.agent AND d.src_addr < r.hi AND d.src_addr + d.nbytes > r.lo)
  OR (d.dst_agent = r.agent AND d.dst_addr < r.hi AND d.dst_addr + d.nbytes > r.lo)
