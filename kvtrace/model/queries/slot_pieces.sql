-- slot_pieces: the descriptor ends that layouts without a K/V part place in slots
-- (desc_end), one row per slot an end touches: an end within one slot is one piece, an
-- end spanning a run of slots (SGLang groups contiguous pages) one piece per slot.
-- Columns: shard VARCHAR, xfer BIGINT, pos INTEGER, side VARCHAR, pool VARCHAR,
--   layer INTEGER, k BIGINT (0-based piece of the end), slot BIGINT,
--   off BIGINT (byte offset within the slot), n BIGINT (bytes in this slot)
WITH e AS (
    SELECT shard, xfer, pos, side, pool, layer, slot, off, nbytes::BIGINT AS nbytes, slot_bytes::BIGINT AS sb
    FROM desc_end WHERE pool IS NOT NULL AND part IS NULL
), r AS (
    SELECT *, unnest(range(0, greatest(1, (off + nbytes + sb - 1) // sb))) AS k FROM e
)
SELECT shard, xfer, pos, side, pool, layer, k, slot + k AS slot,
       CASE WHEN k = 0 THEN off ELSE 0 END AS off,
       least(sb, off + nbytes - k * sb) - CASE WHEN k = 0 THEN off ELSE 0 END AS n
FROM r ORDER BY shard, xfer, pos, side, k
