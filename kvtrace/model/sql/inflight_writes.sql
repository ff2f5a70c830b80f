-- inflight_writes: the overlapping in-flight writes (inflight_pairs' rows whose two ends are
-- destinations), each with what it carries: the checksum of its source slot layer as of the
-- post (the latest write of that slot layer that happens-before the post, as read_predict_ids
-- traces a transfer back to its source), and whether the two carry the same bytes over the
-- bytes they share. Two writes race only if the bytes they carry may differ: 'same' is no
-- hazard (both sources hold equal checksums — kvh64 of the whole slot — of equal slot sizes,
-- and the overlap comes from the same offset in both); 'different': the sources' checksums
-- differ, or the overlap comes from different offsets of them; 'unknown': a source has no
-- checksummed write before the post (its hooks record none, no layout covers it, or the
-- descriptor runs past its slot), so nothing tells identical writes from different ones.
-- overlapping_inflight_writes reads this; the one place the rule is derived.
-- requires: inflight_pairs, desc_hold_ids, writes_ids, shards, id_names
-- Columns: inflight_pairs' (a_side = b_side = 'dst'), then
--   a_src_agent, b_src_agent VARCHAR  -- each write's source agent
--   a_src_pool, b_src_pool VARCHAR    -- its source pool (null: no layout covers the source)
--   a_ck, b_ck UBIGINT                -- its source slot layer's checksum as of the post (null: unknown)
--   content VARCHAR                   -- 'same' | 'different' | 'unknown' (see above)
-- Cost: the pairs are few (none on a clean run of most engines); only their descriptors are
-- looked up in desc_hold_ids (a hash join built on them), and only their sources in writes_ids.
CREATE OR REPLACE TABLE inflight_writes AS
WITH p AS (
    SELECT p.*, sa.sidx AS a_sidx, sb.sidx AS b_sidx
    FROM inflight_pairs p JOIN shards sa ON sa.shard = p.a_shard JOIN shards sb ON sb.shard = p.b_shard
    WHERE p.a_side = 'dst' AND p.b_side = 'dst'
), k AS (   -- the descriptors the pairs name (initiator shard, transfer, post, position)
    SELECT a_sidx AS psidx, a_xfer AS xfer, a_post AS post_seq, a_pos AS pos FROM p
    UNION
    SELECT b_sidx, b_xfer, b_post, b_pos FROM p
), h AS (   -- each one once (its ends' first layout regions)
    SELECT h.psidx, h.xfer, h.post_seq, h.pos, h.s_aid, h.s_pid, h.d_addr, h.s_off, h.s_slot_bytes, h.s_lk,
           h.s_bound,
           h.s_slot IS NOT NULL AND NOT coalesce(h.s_off::UBIGINT + h.nbytes > h.s_slot_bytes, false) AS one_slot   -- (not s_crosses: end_hold_ids)
    FROM desc_hold_ids h JOIN k USING (psidx, xfer, post_seq, pos)
    WHERE h.s_first AND h.d_first
), d AS (   -- with its source slot layer's latest write that happens-before the post (the
    -- writes of those slot layers only: the ASOF join sorts no other); no checksum where
    -- the source is not one slot layer (no layout covers it, or it runs past its slot)
    SELECT h.*, CASE WHEN h.one_slot THEN w.checksum END AS ck
    FROM h ASOF LEFT JOIN (SELECT lk, seq, checksum FROM writes_ids WHERE lk IN (SELECT s_lk FROM h)) w
        ON w.lk = h.s_lk AND h.s_bound >= w.seq
)
SELECT p.* EXCLUDE (a_sidx, b_sidx),
       n.agents[a.s_aid] AS a_src_agent, n.agents[b.s_aid] AS b_src_agent,
       n.pools[a.s_pid] AS a_src_pool, n.pools[b.s_pid] AS b_src_pool,
       a.ck AS a_ck, b.ck AS b_ck,
       CASE WHEN a.ck IS NULL OR b.ck IS NULL THEN 'unknown'
            -- the overlap's first byte sits at the same offset of two equal sources
            WHEN a.ck = b.ck AND a.s_slot_bytes = b.s_slot_bytes
                 AND a.s_off + (p.lo - a.d_addr)::BIGINT = b.s_off + (p.lo - b.d_addr)::BIGINT THEN 'same'
            ELSE 'different' END AS content
FROM p
LEFT JOIN d a ON a.psidx = p.a_sidx AND a.xfer = p.a_xfer AND a.post_seq = p.a_post AND a.pos = p.a_pos
LEFT JOIN d b ON b.psidx = p.b_sidx AND b.xfer = p.b_xfer AND b.post_seq = p.b_post AND b.pos = p.b_pos,
id_names n;
