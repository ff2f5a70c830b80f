-- check: checksum_mismatch
-- severity: error
-- needs: slots, reads, writes, checksums
-- summary: a read's checksum differs from what the data flow predicts (ground truth)
-- explain: For every read with a checksum, predict what the slot layer holds: the latest
--   local write before the read, or — when later — the latest transfer into it not posted
--   after the read (observed complete or not: the consumer acts as if its data is there),
--   traced back to the checksum of the latest write of its
--   source slot that happens-before the post (whole-slot copies only). When the local
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
WITH r AS (SELECT * FROM reads WHERE checksum IS NOT NULL),
lw AS (SELECT lk, seq AS w_seq, checksum AS w_ck FROM writes),
-- transfers into the read's slot layer, observed complete before the read, same generation
dst AS (
    SELECT e.*, s.agent AS s_agent, s.pool AS s_pool, s.layer AS s_layer, s.slot AS s_slot,
           s.lk AS s_lk, s.bound AS s_bound, s.off AS s_off, s.slot_bytes AS s_slot_bytes
    FROM end_hold e JOIN end_hold s ON s.shard = e.shard AND s.xfer = e.xfer AND s.pos = e.pos AND s.side = 'src'
    WHERE e.side = 'dst' AND e.managed AND e.gen_seq IS NOT NULL
), src_ck AS (
    SELECT dst.*, w.w_ck AS x_ck FROM dst ASOF LEFT JOIN lw w ON w.lk = dst.s_lk AND dst.s_bound >= w.w_seq
), x AS (
    SELECT r.lk, r.seq,   -- (slot layer key, seq) names the read's slot layer: integer group keys
           arg_max(t.x_ck, t.post_seq) AS x_ck,
           arg_max(CASE WHEN t.seen_seq <= r.seq THEN t.seen_seq END, t.post_seq) AS x_seen,
           arg_max(t.bound, t.post_seq) AS x_bound,
           arg_max(t.off = 0 AND t.s_off = 0 AND t.nbytes = t.slot_bytes AND t.slot_bytes = t.s_slot_bytes, t.post_seq) AS whole,
           arg_max(t.shard, t.post_seq) AS x_shard, max(t.post_seq) AS x_post
    FROM r JOIN src_ck t ON t.lk = r.lk AND t.gen_seq = r.gen_seq
    WHERE NOT r.seq <= t.bound   -- the latest transfer into the slot not posted after the read
    GROUP BY ALL
), rw AS (  -- the latest local write before the read (precomputed in reads)
    SELECT r.* EXCLUDE (lw_seq, lw_ck, lw_req), r.lw_seq AS w_seq, r.lw_ck AS w_ck FROM r
), j AS (
    SELECT rw.*, x.x_ck, x.x_seen, x.x_bound, x.whole, x.x_shard, x.x_post
    FROM rw LEFT JOIN x USING (lk, seq)
), p AS (
    SELECT *,
        CASE WHEN x_post IS NULL THEN (CASE WHEN w_seq > gen_seq OR gen_seq IS NULL THEN 'write' END)
             WHEN w_seq IS NULL OR w_seq <= gen_seq THEN 'xfer'
             WHEN w_seq >= x_seen THEN 'write'      -- the write follows the observed completion
             WHEN w_seq <= x_bound THEN 'xfer'      -- the write happens-before the post
             END AS via
    FROM j
), m AS (
    SELECT p.*, CASE via WHEN 'write' THEN w_ck ELSE x_ck END AS predicted
    FROM p WHERE via = 'write' OR (via = 'xfer' AND whole AND x_ck IS NOT NULL)
), bad AS (
    SELECT m.*, (m.checksum = m.w_ck AND m.via = 'xfer') OR m.checksum IN (SELECT checksum FROM poison) AS is_stale
    FROM m WHERE predicted IS NOT NULL AND checksum <> predicted
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
