-- end_hold_ids: every descriptor end with its transfer's post, the shard where the end's
-- agent lives (home), when that shard knows the transfer ended, and — for ends in
-- allocator-managed pools — the holding of the transfer's request that covers the post
-- (the latest alloc of that slot by the request that happens-before the post).
-- A remote end (its agent lives on another shard than the post) whose request holds no
-- slot by an alloc that happens-before the post is "not held" only when that is a fact:
-- the home shard's events can be ordered before the post's (shard_order), its tail is not
-- cut, and no alloc of the slot by the request is merely unordered with the post.
-- Otherwise the holding is unknown (h_unknown), never "not held"; so is the holding of a
-- transfer that carries no request (whose pages it moves is unknown).
-- requires: desc_end, xfers, agent_ids, managed, xfer_seen, holding_list, shard_order, shard_cut
-- pieces: xfers.xfer by holding_list, xfers
-- Built from the transfers with $lo <= xfer < $hi (null: unbounded; TraceModel builds it in
-- one piece unless the holdings and transfers outgrow a share of the memory cap, then in
-- ranges of transfers): each piece reads its transfers' descriptors (row groups of the
-- index outside the range are skipped) and the holdings of their requests only, so its
-- hash joins' build sides fit the cap and nothing spills (in one statement, 100M events
-- under a 3 GB cap spilled every end with all its columns: x5 the in-memory CPU).
-- Stored narrow: names are small integer ids here (the view end_hold, which every reader reads,
-- gives them back), because writing a text column of its two rows per descriptor cost ~0.7 cpu-s
-- per column at 10M events, an integer ~0.1 (shard, side, agent, pool, part, h_shard: ~4 cpu-s).
-- Columns (end_hold's, with these in place of its names):
--   dst BOOLEAN           -- the destination end (end_hold.side = 'dst'; else 'src')
--   aid INTEGER           -- the end's agent (agent_ids)
--   pid, part_id INTEGER  -- its pool and part (lay)
--   psidx, h_sidx INTEGER -- the initiator and home shards (shards.sidx), as in end_hold
--   the rest as end_hold: xfer, pos, addr, nbytes, layer, slot, off, slot_bytes, crosses, dlist, idx,
--   request, post_seq, bound, t_ns, managed, seen_seq, end_seq, h_blind, h_unknown, alloc_seq,
--   free_seq, release_seq, gen_seq, page, sk, lk
CREATE OR REPLACE TABLE end_hold_ids AS
WITH e AS (
    SELECT d.xfer, d.pos, d.side = 'dst' AS dst, a.aid, d.addr, d.nbytes, d.pid, d.layer, d.part_id, d.slot, d.off,
           d.slot_bytes, d.crosses, d.dlist, d.idx, x.request, x.post_seq, x.sidx AS psidx,
           x.know[a.h_sidx + 1] AS bound, x.t_ns, a.h_sidx,
           m.pool IS NOT NULL AS managed, s.seen_seq, s.end_seq,
           a.h_sidx IS DISTINCT FROM x.sidx AND (o.from_sidx IS NULL OR c.cut IS NOT NULL) AS h_blind,
           -- holding_list's key; null where a part is (an equi-join on the parts never matches a null)
           CASE WHEN a.h_shard IS NOT NULL AND d.agent IS NOT NULL AND d.pool IS NOT NULL AND d.slot IS NOT NULL
                     AND x.request IS NOT NULL THEN hash(a.h_shard, d.agent, d.pool, d.slot, x.request) END AS hk,
           -- join keys of the slot and slot layer on the home shard (see slot_ev)
           hash(a.h_shard, d.agent, d.pool, d.slot) AS sk, hash(a.h_shard, d.agent, d.pool, d.layer, d.slot) AS lk
    FROM desc_end d JOIN xfers x USING (shard, xfer)
    LEFT JOIN agent_ids a ON a.agent = d.agent
    LEFT JOIN shard_order o ON o.from_sidx = a.h_sidx AND o.to_sidx = x.sidx
    LEFT JOIN shard_cut c ON c.shard = a.h_shard
    LEFT JOIN managed m ON m.agent = d.agent AND m.pool = d.pool
    LEFT JOIN xfer_seen s ON s.shard = d.shard AND s.xfer = d.xfer AND s.side_shard = a.h_shard
    WHERE ($lo IS NULL OR (d.xfer >= $lo AND x.xfer >= $lo)) AND ($hi IS NULL OR (d.xfer < $hi AND x.xfer < $hi))
), j AS (  -- the request's latest alloc of the slot that happens-before the post
    -- (a list of one holding, the usual case, is read without a lambda)
    SELECT e.*, CASE WHEN len(k.hl) = 1 THEN CASE WHEN k.hl[1].a <= e.bound THEN k.hl[1] END
                     ELSE list_filter(k.hl, lambda h: h.a <= e.bound)[-1] END AS h,
           -- allocs of the slot by the request not known to come before or after the post
           e.h_sidx IS DISTINCT FROM e.psidx
               AND CASE WHEN len(k.hl) = 1
                        THEN coalesce(k.hl[1].a > e.bound AND (e.end_seq IS NULL OR k.hl[1].a < e.end_seq), false)
                        ELSE len(list_filter(k.hl, lambda h: h.a > e.bound AND (e.end_seq IS NULL OR h.a < e.end_seq))) > 0
                   END AS unordered
    FROM e LEFT JOIN (SELECT hk, hl FROM holding_list
                      WHERE ($lo IS NULL AND $hi IS NULL)
                         OR request IN (SELECT request FROM xfers WHERE ($lo IS NULL OR xfer >= $lo) AND ($hi IS NULL OR xfer < $hi))) k
        ON k.hk = e.hk
)
SELECT j.* EXCLUDE (h, unordered, hk),
       coalesce(managed AND h IS NULL AND (request IS NULL OR h_blind OR unordered), false) AS h_unknown,
       h.a AS alloc_seq, h.f AS free_seq, h.r AS release_seq, h.g AS gen_seq, h.p AS page
FROM j;
