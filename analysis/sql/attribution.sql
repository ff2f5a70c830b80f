-- query attribution: who wrote the bytes of every corrupted read, from checksums alone.
-- For every read (one slot layer of one read event) the recorded writes holding the same
-- checksum are candidate origins. The best candidate is one written for the read's own
-- page — same pool and layer, by the reading request (or by the request whose allocation
-- began the slot's content, for a prefix page shared from an earlier turn; or into a slot
-- the reading request took by a prefix-cache hit in the generation that write filled, e.g.
-- the producer's page another request wrote and this one shares) with the same page
-- ordinal —, then one a recorded transfer carried from its slot layer into the read's
-- (posted no later than the read, not over on the writer's side before the write), then a
-- write on the read's own slot layer, then the latest. A read is corrupted when its
-- checksum differs from the data-flow prediction (read_predict: the checksum_mismatch
-- check), when it is never-written poison, when its best origin was written for another
-- page, or when no recorded write holds its bytes although its producer wrote that page
-- into a slot of the same size and no transfer delivered into it (a page a transfer
-- composed from parts, as with heterogeneous TP, matches no single write).
-- Columns:
--   agent, shard VARCHAR, seq BIGINT, request, pool VARCHAR, layer INTEGER, slot, page BIGINT
--   checksum UBIGINT    -- what the read saw
--   why VARCHAR         -- 'flow' (differs from the data-flow prediction) | 'poison' | 'page' (another page's bytes)
--                          | 'unwritten' (no recorded write holds these bytes)
--   kind VARCHAR        -- 'write' (a recorded write holds these bytes) | 'poison' | 'unknown'
--   o_agent, o_shard VARCHAR, o_seq BIGINT, o_request, o_pool VARCHAR, o_layer INTEGER,
--   o_slot, o_page BIGINT  -- the origin write (kind = 'write')
--   local BOOLEAN       -- the origin write is on the read's own slot layer
--   x_shard VARCHAR, xfer, x_post BIGINT, x_request VARCHAR  -- the transfer that carried it (null: none found)
--   via VARCHAR, p_shard VARCHAR, p_seq BIGINT  -- what the data flow predicted: its write ('write'),
--                          or the post of the transfer that delivers it ('xfer')
WITH pw AS (   -- writes a later request took by a prefix-cache hit (a shared alloc of the slot in
               -- the generation the write filled, at the same page ordinal): written for its page too
    SELECT w.shard, w.seq, w.sk, w.checksum, w.pool, w.layer, h.request AS i_request, h.page AS i_page
    FROM writes w JOIN holdings h ON h.sk = w.sk AND h.shard = w.shard AND h.shared AND h.page = w.page
                                 AND h.gen_seq <= w.seq AND w.seq < h.alloc_seq
), rp AS NOT MATERIALIZED (   -- the reads with a checksum (read_predict's rows), with the request
                                -- whose allocation began the slot's content, and its page there
    SELECT r.*, g.request AS g_request, g.page AS g_page
    FROM reads r LEFT JOIN holdings g ON g.sk = r.sk AND g.alloc_seq = r.gen_seq
    WHERE r.checksum IS NOT NULL
), noid AS (   -- reads no recorded write of the same bytes was written for (their own page: see cand's
               -- ident); every other read has its best origin there and is not corrupted unless in flow
    SELECT r.lk, r.seq FROM rp r
    ANTI JOIN writes w ON w.checksum = r.checksum AND NOT (w.shard = r.shard AND w.seq > r.seq)
         AND w.pool = r.pool AND w.layer = r.layer AND ((w.request = r.request AND w.page = r.page)
             OR (w.request = r.g_request AND w.page = r.g_page))
    ANTI JOIN pw ON pw.checksum = r.checksum AND NOT (pw.shard = r.shard AND pw.seq > r.seq)
         AND pw.pool = r.pool AND pw.layer = r.layer AND pw.i_request = r.request AND pw.i_page = r.page
), flow AS (   -- reads the data flow or poison already marks as corrupted
    SELECT lk, seq FROM read_predict
    WHERE (predicted IS NOT NULL AND checksum <> predicted) OR checksum IN (SELECT checksum FROM poison)
), rpr AS (    -- only these reads can be reported: the rest of the query looks at them alone
               -- (and only they take their prediction from read_predict)
    SELECT r.*, p.via, p.predicted, p.w_seq, p.w_ck, p.x_shard, p.x_post, p.is_stale
    FROM (SELECT * FROM rp SEMI JOIN (SELECT lk, seq FROM noid UNION SELECT lk, seq FROM flow) k USING (lk, seq)) r
    JOIN read_predict p USING (lk, seq)
), cand AS (   -- recorded writes holding the same bytes
    SELECT r.lk AS r_lk, r.seq AS r_seq, w.shard AS o_shard, w.seq AS o_seq, w.agent AS o_agent,
           w.request AS o_request, w.pool AS o_pool, w.layer AS o_layer, w.slot AS o_slot, w.page AS o_page,
           w.lk AS o_lk, w.lk = r.lk AS local,
           w.pool = r.pool AND w.layer = r.layer AND ((w.request = r.request AND w.page = r.page)
               OR (w.request = r.g_request AND w.page = r.g_page)
               OR EXISTS (SELECT 1 FROM pw WHERE pw.shard = w.shard AND pw.seq = w.seq AND pw.sk = w.sk
                          AND pw.i_request = r.request AND pw.i_page = r.page)) AS ident
    FROM rpr r JOIN writes w ON w.checksum = r.checksum
    WHERE NOT (w.shard = r.shard AND w.seq > r.seq)     -- not a later write on the reader's own shard
), need AS (   -- reads whose origin is asked for: no candidate written for their page, or corrupted anyway
    SELECT r_lk, r_seq FROM cand GROUP BY ALL HAVING NOT bool_or(ident)
    UNION SELECT lk, seq FROM flow
), nc AS (SELECT c.* FROM cand c SEMI JOIN need n USING (r_lk, r_seq)),
ends AS (   -- descriptor ends slot by slot (k: position in a run of slots), only those touching a candidate
    SELECT * FROM (
        SELECT shard, xfer, pos, side, lk, 0 AS k, bound, end_seq, request, post_seq, t_ns FROM end_hold
        UNION ALL
        SELECT r.shard, r.xfer, r.pos, r.side, r.lk, r.slot - r.s0, r.bound, r.end_seq, r.request, r.post_seq, e.t_ns
        FROM run_hold r JOIN xfers e USING (shard, xfer))
    WHERE lk IN (SELECT r_lk FROM nc) OR lk IN (SELECT o_lk FROM nc)
), carr AS (   -- transfers from a candidate's slot layer into the read's slot layer
    SELECT c.r_lk, c.r_seq, c.o_shard, c.o_seq, d.shard AS x_shard, d.xfer, d.post_seq AS x_post,
           d.request AS x_request, d.t_ns
    FROM (SELECT * FROM nc WHERE NOT ident) c
    JOIN ends d ON d.lk = c.r_lk AND d.side = 'dst'
    JOIN ends s ON s.shard = d.shard AND s.xfer = d.xfer AND s.pos = d.pos AND s.k = d.k AND s.side = 'src'
               AND s.lk = c.o_lk
    WHERE NOT c.r_seq <= d.bound                        -- not posted after the read
      AND (s.end_seq IS NULL OR c.o_seq < s.end_seq)    -- not over on the writer's side before the write
), best AS (
    SELECT * FROM (
        SELECT c.*, x.x_shard, x.xfer, x.x_post, x.x_request,
               row_number() OVER (PARTITION BY c.r_lk, c.r_seq
                                  ORDER BY c.ident DESC, x.xfer IS NOT NULL DESC, c.local DESC,
                                           x.t_ns DESC NULLS LAST, c.o_seq DESC, c.o_shard) AS k
        FROM nc c LEFT JOIN carr x USING (r_lk, r_seq, o_shard, o_seq))
    WHERE k = 1
), lay1 AS (SELECT DISTINCT agent, pool, layer, slot_bytes FROM lay),
unwritten AS (   -- no recorded write holds the bytes, yet the producer wrote the read's page in a slot of its size
    SELECT DISTINCT r.lk, r.seq
    FROM rpr r
    JOIN writes w ON w.pool = r.pool AND w.layer = r.layer AND w.agent <> r.agent
                 AND ((w.request = r.request AND w.page = r.page) OR (w.request = r.g_request AND w.page = r.g_page)
                      OR EXISTS (SELECT 1 FROM pw WHERE pw.shard = w.shard AND pw.seq = w.seq AND pw.sk = w.sk
                                 AND pw.i_request = r.request AND pw.i_page = r.page))
    JOIN lay1 a ON a.agent = w.agent AND a.pool = w.pool AND a.layer = w.layer
    JOIN lay1 b ON b.agent = r.agent AND b.pool = r.pool AND b.layer = r.layer AND b.slot_bytes = a.slot_bytes
    WHERE NOT EXISTS (SELECT 1 FROM cand c WHERE c.r_lk = r.lk AND c.r_seq = r.seq)
      AND NOT coalesce(r.w_seq > r.gen_seq, false)      -- the consumer did not write it itself
      AND NOT EXISTS (SELECT 1 FROM shard_cut WHERE cut IS NOT NULL OR untraced > 0)   -- every write and post is present
      AND r.x_post IS NULL                              -- and no transfer delivered into it: a page
      AND NOT EXISTS (SELECT 1 FROM run_hold h          -- composed from parts matches no write
                      WHERE h.side = 'dst' AND h.lk = r.lk AND h.h.g = r.gen_seq AND NOT r.seq <= h.bound)
), bad AS (
    SELECT r.* EXCLUDE (x_shard, x_post), r.x_shard AS px_shard, r.x_post AS px_post,
           o.* EXCLUDE (r_lk, r_seq, k, o_lk, ident),
           CASE WHEN r.predicted IS NOT NULL AND r.checksum <> r.predicted THEN 'flow'
                WHEN r.checksum IN (SELECT checksum FROM poison) THEN 'poison'
                WHEN NOT o.ident THEN 'page'
                WHEN u.lk IS NOT NULL THEN 'unwritten' END AS why
    FROM rpr r LEFT JOIN best o ON o.r_lk = r.lk AND o.r_seq = r.seq
    LEFT JOIN unwritten u ON u.lk = r.lk AND u.seq = r.seq
    WHERE o.r_lk IS NOT NULL OR u.lk IS NOT NULL OR (r.lk, r.seq) IN (SELECT (lk, seq) FROM flow)
)
SELECT agent, shard, seq, request, pool, layer, slot, page, checksum, why,
       CASE WHEN o_seq IS NOT NULL THEN 'write' WHEN checksum IN (SELECT checksum FROM poison) THEN 'poison'
            ELSE 'unknown' END AS kind,
       o_agent, o_shard, o_seq, o_request, o_pool, o_layer, o_slot, o_page, local, x_shard, xfer, x_post, x_request,
       via, CASE WHEN via = 'write' THEN shard WHEN via = 'xfer' THEN px_shard END AS p_shard,
       CASE WHEN via = 'write' THEN w_seq WHEN via = 'xfer' THEN px_post END AS p_seq
FROM bad
WHERE why IS NOT NULL
ORDER BY shard, seq, slot;
