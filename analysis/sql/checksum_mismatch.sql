-- check: checksum_mismatch
-- severity: error
-- needs: slots, reads, writes, checksums
-- summary: a read's checksum differs from what the data flow predicts (ground truth)
-- explain: For every read with a checksum, predict what the slot layer holds: the latest
--   local write before the read, or — when later — the latest transfer into it not posted
--   after the read (observed complete or not: the consumer acts as if its data is there),
--   traced back to the checksum of the latest write of its
--   source slot that happens-before the post (whole-slot copies only: a descriptor per
--   slot or a coalesced run of whole slots; reads it cannot predict are counted and said,
--   never read as "holds": see --explain's last line). When the local
--   write and the transfer are concurrent the prediction is ambiguous and the read is
--   skipped (other checks report the race). A mismatch is corruption the consumer really
--   saw; 'stale' marks reads that saw the slot's earlier content or never-written poison —
--   the signature of data that arrived after the read.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- consumer agent
--   request VARCHAR
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- first mismatching read
--   slots BIGINT[]
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- [the producer (write or post), the read]
--   count BIGINT       -- mismatching (read, slot) pairs
--   stale BIGINT       -- of them, reads that saw earlier content or poison
--   message VARCHAR
WITH bad AS (   -- the per-read prediction is built once in read_predict (kvtrace/model/sql/read_predict.sql);
                -- the mismatched ones (few) take the rest of their read's row from reads
    SELECT r.*, p.via, p.predicted, p.w_seq, p.x_shard, p.x_post, p.is_stale
    FROM (SELECT * FROM read_predict WHERE predicted IS NOT NULL AND checksum <> predicted) p
    JOIN reads r USING (lk, seq)
)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) AS slots,
       [CASE WHEN arg_min(via, seq) = 'write' THEN ev(any_value(shard), arg_min(w_seq, seq))
             ELSE ev(arg_min(x_shard, seq), arg_min(x_post, seq)) END, ev(any_value(shard), min(seq))] AS events,
       count(*) AS count, count(*) FILTER (WHERE is_stale) AS stale,
       format('{} read {} slot-layer(s) of pool {} for request {} whose checksum differs from what was {} (slots {}){}.',
              agent, count(*), pool, request,
              CASE WHEN count(*) FILTER (WHERE via = 'xfer') > 0 THEN 'delivered by its transfer' ELSE 'written there' END,
              array_to_string(list(DISTINCT slot ORDER BY slot)[1:8], ','),
              CASE WHEN count(*) FILTER (WHERE is_stale) > 0
                   THEN format('; {} of them still held earlier content or never-written poison — the data arrived after the read', count(*) FILTER (WHERE is_stale))
                   ELSE '' END) AS message
FROM bad GROUP BY agent, request, pool
ORDER BY min(seq);
