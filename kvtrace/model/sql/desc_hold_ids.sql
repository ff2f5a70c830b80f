-- desc_hold_ids: every descriptor with both its ends side by side (one row; s_* the source
-- end, d_* the destination end), each end with its transfer's post, the shard where the end's
-- agent lives (home), when that shard knows the transfer ended, and — for ends in
-- allocator-managed pools — the holding of the transfer's request that covers the post
-- (the latest alloc of that slot by the request that happens-before the post).
-- A remote end (its agent lives on another shard than the post) whose request holds no
-- slot by an alloc that happens-before the post is "not held" only when that is a fact:
-- the home shard's events can be ordered before the post's (shard_order), its tail is not
-- cut, and no alloc of the slot by the request is merely unordered with the post.
-- Otherwise the holding is unknown (h_unknown), never "not held"; so is the holding of a
-- transfer that carries no request (whose pages it moves is unknown).
-- requires: desc_ends, xfers, agent_ids, managed, xfer_seen, holding_list, shard_order, shard_cut, shards, lay
-- pieces: xfers.xfer by holding_list, holding_list, xfers
-- Built from the transfers with $lo <= xfer < $hi (null: unbounded; TraceModel builds it in
-- one piece unless the holdings (hashed twice: once per end) and transfers outgrow a share of
-- the memory cap, then in
-- ranges of transfers): each piece reads its transfers' descriptors (row groups of the
-- index outside the range are skipped) and the holdings of their requests only, so its
-- hash joins' build sides fit the cap and nothing spills (in one statement, 100M events
-- under a 3 GB cap spilled every end with all its columns: x5 the in-memory CPU).
-- One row per descriptor, not per end: the readers of both ends (desc_match_ids,
-- read_predict_ids) read them here instead of joining an end to its other end (at 10M
-- events that join of 6.8M to 6.8M ends cost ~2 cpu-s in desc_match_ids, ~5 in
-- read_predict_ids), and the descriptor's columns (xfer, pos, nbytes, request, post_seq,
-- psidx, t_ns) are stored once. The view end_hold_ids gives the ends one by one.
-- Stored narrow: names are small integer ids here (the views end_hold_ids and end_hold give
-- the ends back, end_hold with their names), because writing a text column per end cost
-- ~0.7 cpu-s per column at 10M events, an integer ~0.1. Not stored at all: what end_hold_ids
-- computes from the stored columns where a reader asks for it (crosses from off, nbytes and
-- slot_bytes; the slot's key sk from the names of the ids), since no object of the analysis
-- reads them at scale (10M events: ~-1.2 of its ~14 cpu-s, the two hashes and four columns
-- fewer; bench/results/checks.txt).
-- Columns:
--   xfer BIGINT, pos INTEGER, nbytes UBIGINT  -- the descriptor
--   request VARCHAR, post_seq BIGINT, psidx INTEGER, t_ns BIGINT  -- its transfer's post (xfers;
--                           psidx: the initiator shard, shards.sidx)
--   s_aid INTEGER           -- the source end's agent (agent_ids)
--   s_addr UBIGINT, s_pid, s_layer, s_part_id INTEGER, s_slot, s_off BIGINT, s_slot_bytes UBIGINT,
--   s_dlist, s_idx BIGINT   -- the end as desc_ends resolves it (pid, part_id: lay's ids)
--   s_bound BIGINT          -- largest seq of the home shard that happens-before the post
--   s_h_sidx INTEGER        -- home shard of the end's agent (shards.sidx; null: agent never recorded)
--   s_managed BOOLEAN       -- the pool has alloc events on that agent
--   s_seen_seq, s_end_seq BIGINT  -- from these seqs on the home shard the data is known complete /
--                           the transfer known over (null: never)
--   s_h_blind BOOLEAN       -- a remote end whose home shard is not ordered before the post's, or is cut
--   s_h_unknown BOOLEAN     -- the holding cannot be decided (unordered, or past a cut)
--   s_alloc_seq, s_free_seq, s_release_seq, s_gen_seq, s_page BIGINT  -- the holding (null: none)
--   s_lk UBIGINT            -- join key of the slot layer on the home shard (see slot_ev)
--   s_first BOOLEAN         -- desc_ends' (false only where the agent's layout regions overlap)
--   d_aid ... d_first       -- the destination end, likewise
CREATE OR REPLACE TABLE desc_hold_ids AS
WITH ag AS (   -- each agent with each shard a transfer may be posted on (to_sidx): its id, its
    -- home shard, and whether that home shard's events are known ordered before to_sidx's and
    -- not cut: one join per end instead of three (agent_ids, shard_order, shard_cut). An end
    -- whose agent matches no row (null) is blind, as before.
    SELECT i.agent, i.aid, i.h_shard, i.h_sidx, s.sidx AS to_sidx,
           so.from_sidx IS NOT NULL AND sc.cut IS NULL AS known
    FROM agent_ids i CROSS JOIN shards s
    LEFT JOIN shard_order so ON so.from_sidx = i.h_sidx AND so.to_sidx = s.sidx
    LEFT JOIN shard_cut sc ON sc.shard = i.h_shard
), xsn AS (   -- xfer_seen keyed by shard indexes (the post's shard, the side shard), and
    -- managed by agent and pool ids (mg), so the ends join them on integers, not names;
    -- with ag: 10M events ~-0.8 cpu-s of ~12.8 (bench/results/checks.txt)
    SELECT s.sidx AS xsidx, v.xfer, v.side_sidx, v.seen_seq, v.end_seq FROM xfer_seen v JOIN shards s USING (shard)
), mg AS (
    SELECT DISTINCT a.aid, l.pid FROM managed m JOIN agent_ids a USING (agent) JOIN lay l USING (pool)
), e AS (
    SELECT d.xfer, d.pos, d.nbytes, x.request, x.post_seq, x.sidx AS psidx, x.t_ns,
           sa.aid AS s_aid, d.s_addr, d.s_pid, d.s_layer, d.s_part_id, d.s_slot, d.s_off, d.s_slot_bytes,
           d.s_dlist, d.s_idx, x.know[sa.h_sidx + 1] AS s_bound, sa.h_sidx AS s_h_sidx,
           sm.pid IS NOT NULL AS s_managed, ss.seen_seq AS s_seen_seq, ss.end_seq AS s_end_seq,
           sa.h_sidx IS DISTINCT FROM x.sidx AND NOT coalesce(sa.known, false) AS s_h_blind,
           d.s_first,
           ta.aid AS d_aid, d.d_addr, d.d_pid, d.d_layer, d.d_part_id, d.d_slot, d.d_off, d.d_slot_bytes,
           d.d_dlist, d.d_idx, x.know[ta.h_sidx + 1] AS d_bound, ta.h_sidx AS d_h_sidx,
           tm.pid IS NOT NULL AS d_managed, ts.seen_seq AS d_seen_seq, ts.end_seq AS d_end_seq,
           ta.h_sidx IS DISTINCT FROM x.sidx AND NOT coalesce(ta.known, false) AS d_h_blind,
           d.d_first,
           -- holding_list's key; null where a part is (an equi-join on the parts never matches a null)
           CASE WHEN sa.h_shard IS NOT NULL AND d.s_agent IS NOT NULL AND d.s_pool IS NOT NULL AND d.s_slot IS NOT NULL
                     AND x.request IS NOT NULL THEN hash(sa.h_shard, d.s_agent, d.s_pool, d.s_slot, x.request) END AS s_hk,
           CASE WHEN ta.h_shard IS NOT NULL AND d.d_agent IS NOT NULL AND d.d_pool IS NOT NULL AND d.d_slot IS NOT NULL
                     AND x.request IS NOT NULL THEN hash(ta.h_shard, d.d_agent, d.d_pool, d.d_slot, x.request) END AS d_hk,
           -- join key of the slot layer on the home shard (see slot_ev)
           hash(sa.h_shard, d.s_agent, d.s_pool, d.s_layer, d.s_slot) AS s_lk,
           hash(ta.h_shard, d.d_agent, d.d_pool, d.d_layer, d.d_slot) AS d_lk
    FROM desc_ends d JOIN xfers x USING (shard, xfer)
    LEFT JOIN ag sa ON sa.agent = d.s_agent AND sa.to_sidx = x.sidx
    LEFT JOIN ag ta ON ta.agent = d.d_agent AND ta.to_sidx = x.sidx
    LEFT JOIN mg sm ON sm.aid = sa.aid AND sm.pid = d.s_pid
    LEFT JOIN mg tm ON tm.aid = ta.aid AND tm.pid = d.d_pid
    LEFT JOIN xsn ss ON ss.xsidx = x.sidx AND ss.xfer = d.xfer AND ss.side_sidx = sa.h_sidx
    LEFT JOIN xsn ts ON ts.xsidx = x.sidx AND ts.xfer = d.xfer AND ts.side_sidx = ta.h_sidx
    WHERE ($lo IS NULL OR (d.xfer >= $lo AND x.xfer >= $lo)) AND ($hi IS NULL OR (d.xfer < $hi AND x.xfer < $hi))
), k AS NOT MATERIALIZED (   -- (each end's join reads holding_list itself: no copy of it is kept)
    SELECT hk, hl FROM holding_list
    WHERE ($lo IS NULL AND $hi IS NULL)
       OR request IN (SELECT request FROM xfers WHERE ($lo IS NULL OR xfer >= $lo) AND ($hi IS NULL OR xfer < $hi))
), j AS (  -- each end's request's latest alloc of the slot that happens-before the post
    -- (a list of one holding, the usual case, is read without a lambda)
    SELECT e.*,
           CASE WHEN len(sk.hl) = 1 THEN CASE WHEN sk.hl[1].a <= e.s_bound THEN sk.hl[1] END
                ELSE list_filter(sk.hl, lambda h: h.a <= e.s_bound)[-1] END AS s_h,
           CASE WHEN len(tk.hl) = 1 THEN CASE WHEN tk.hl[1].a <= e.d_bound THEN tk.hl[1] END
                ELSE list_filter(tk.hl, lambda h: h.a <= e.d_bound)[-1] END AS d_h,
           -- allocs of the slot by the request not known to come before or after the post
           e.s_h_sidx IS DISTINCT FROM e.psidx
               AND CASE WHEN len(sk.hl) = 1
                        THEN coalesce(sk.hl[1].a > e.s_bound AND (e.s_end_seq IS NULL OR sk.hl[1].a < e.s_end_seq), false)
                        ELSE len(list_filter(sk.hl, lambda h: h.a > e.s_bound AND (e.s_end_seq IS NULL OR h.a < e.s_end_seq))) > 0
                   END AS s_unordered,
           e.d_h_sidx IS DISTINCT FROM e.psidx
               AND CASE WHEN len(tk.hl) = 1
                        THEN coalesce(tk.hl[1].a > e.d_bound AND (e.d_end_seq IS NULL OR tk.hl[1].a < e.d_end_seq), false)
                        ELSE len(list_filter(tk.hl, lambda h: h.a > e.d_bound AND (e.d_end_seq IS NULL OR h.a < e.d_end_seq))) > 0
                   END AS d_unordered
    FROM e LEFT JOIN k sk ON sk.hk = e.s_hk LEFT JOIN k tk ON tk.hk = e.d_hk
)
SELECT xfer, pos, nbytes, request, post_seq, psidx, t_ns,
       s_aid, s_addr, s_pid, s_layer, s_part_id, s_slot, s_off, s_slot_bytes, s_dlist, s_idx, s_bound,
       s_h_sidx, s_managed, s_seen_seq, s_end_seq, s_h_blind,
       coalesce(s_managed AND s_h IS NULL AND (request IS NULL OR s_h_blind OR s_unordered), false) AS s_h_unknown,
       s_h.a AS s_alloc_seq, s_h.f AS s_free_seq, s_h.r AS s_release_seq, s_h.g AS s_gen_seq, s_h.p AS s_page,
       s_lk, s_first,
       d_aid, d_addr, d_pid, d_layer, d_part_id, d_slot, d_off, d_slot_bytes, d_dlist, d_idx, d_bound,
       d_h_sidx, d_managed, d_seen_seq, d_end_seq, d_h_blind,
       coalesce(d_managed AND d_h IS NULL AND (request IS NULL OR d_h_blind OR d_unordered), false) AS d_h_unknown,
       d_h.a AS d_alloc_seq, d_h.f AS d_free_seq, d_h.r AS d_release_seq, d_h.g AS d_gen_seq, d_h.p AS d_page,
       d_lk, d_first
FROM j;
