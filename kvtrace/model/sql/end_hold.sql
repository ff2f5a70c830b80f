-- end_hold: every descriptor end with its transfer's post, the shard where the end's
-- agent lives (home), when that shard knows the transfer ended, and — for ends in
-- allocator-managed pools — the holding of the transfer's request that covers the post
-- (the latest alloc of that slot by the request that happens-before the post).
-- A remote end (its agent lives on another shard than the post) whose request holds no
-- slot by an alloc that happens-before the post is "not held" only when that is a fact:
-- the home shard's events can be ordered before the post's (shard_order), its tail is not
-- cut, and no alloc of the slot by the request is merely unordered with the post.
-- Otherwise the holding is unknown (h_unknown), never "not held"; so is the holding of a
-- transfer that carries no request (whose pages it moves is unknown).
-- requires: desc_end, xfers, agent_home, managed, xfer_seen, holding_list, shard_order, shard_cut
-- pieces: xfers.xfer by holding_list, xfers
-- Built from the transfers with $lo <= xfer < $hi (null: unbounded; TraceModel builds it in
-- one piece unless the holdings and transfers outgrow a share of the memory cap, then in
-- ranges of transfers): each piece reads its transfers' descriptors (row groups of the
-- index outside the range are skipped) and the holdings of their requests only, so its
-- hash joins' build sides fit the cap and nothing spills (in one statement, 100M events
-- under a 3 GB cap spilled every end with all its columns: x5 the in-memory CPU).
-- Columns:
--   shard, xfer, pos, side, agent, addr, nbytes, pool, layer, part, slot, off, slot_bytes, crosses, dlist, idx
--   request VARCHAR, post_seq BIGINT, psidx INTEGER, t_ns BIGINT  -- from xfers (not its op: no reader
--                         of the ends needs it, and each stored string column costs ~0.35 cpu-s at 10M)
--   bound BIGINT          -- largest seq of h_shard that happens-before the post (x HB post iff x.seq <= bound)
--   h_shard VARCHAR, h_sidx INTEGER  -- home shard of the end's agent (null: agent never recorded)
--   managed BOOLEAN       -- the pool has alloc events on that agent
--   seen_seq BIGINT       -- from this seq on h_shard the data is known complete (null: never)
--   end_seq BIGINT        -- from this seq on h_shard the transfer is known over (done/error/notification)
--   alloc_seq, free_seq, release_seq, gen_seq, page BIGINT  -- the holding (null: none)
--   h_blind BOOLEAN       -- a remote end whose home shard is not ordered before the post's, or is cut
--   h_unknown BOOLEAN     -- the holding cannot be decided (unordered, or past a cut); see above
--   sk, lk UBIGINT        -- join keys of the slot and slot layer on h_shard (see slot_ev)
CREATE OR REPLACE TABLE end_hold AS
WITH e AS (
    SELECT d.shard, d.xfer, d.pos, d.side, d.agent, d.addr, d.nbytes, d.pool, d.layer, d.part, d.slot, d.off,
           d.slot_bytes, d.crosses, d.dlist, d.idx, x.request, x.post_seq, x.sidx AS psidx,
           x.know[a.h_sidx + 1] AS bound, x.t_ns, a.h_shard, a.h_sidx,
           m.pool IS NOT NULL AS managed, s.seen_seq, s.end_seq,
           a.h_sidx IS DISTINCT FROM x.sidx AND (o.from_sidx IS NULL OR c.cut IS NOT NULL) AS h_blind,
           -- holding_list's key; null where a part is (an equi-join on the parts never matches a null)
           CASE WHEN a.h_shard IS NOT NULL AND d.agent IS NOT NULL AND d.pool IS NOT NULL AND d.slot IS NOT NULL
                     AND x.request IS NOT NULL THEN hash(a.h_shard, d.agent, d.pool, d.slot, x.request) END AS hk
    FROM desc_end d JOIN xfers x USING (shard, xfer)
    LEFT JOIN agent_home a ON a.agent = d.agent
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
       h.a AS alloc_seq, h.f AS free_seq, h.r AS release_seq, h.g AS gen_seq, h.p AS page,
       hash(h_shard, agent, pool, slot) AS sk, hash(h_shard, agent, pool, layer, slot) AS lk
FROM j;
