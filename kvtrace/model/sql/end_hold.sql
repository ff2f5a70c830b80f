-- end_hold: every descriptor end with its transfer's post, the shard where the end's agent
-- lives (home), when that shard knows the transfer ended, and — for ends in allocator-managed
-- pools — the holding of the transfer's request that covers the post. Derived in
-- desc_hold_ids (the rules are there; both ends of a descriptor in one row), which stores small
-- integer ids in place of the names; end_hold_ids gives its ends one by one, and this view
-- gives the names back (id_names), so a reader
-- pays for a name only where it reads it (a hot reader may read end_hold_ids itself).
-- requires: end_hold_ids, id_names
-- Columns:
--   shard, xfer, pos, side, agent, addr, nbytes, pool, layer, part, slot, off, slot_bytes, crosses, dlist, idx
--                         -- the end, as desc_end resolves it
--   request VARCHAR, post_seq BIGINT, psidx INTEGER, t_ns BIGINT  -- from xfers (not its op: no reader
--                         of the ends needs it)
--   bound BIGINT          -- largest seq of h_shard that happens-before the post (x HB post iff x.seq <= bound)
--   h_shard VARCHAR, h_sidx INTEGER  -- home shard of the end's agent (null: agent never recorded)
--   managed BOOLEAN       -- the pool has alloc events on that agent
--   seen_seq BIGINT       -- from this seq on h_shard the data is known complete (null: never)
--   end_seq BIGINT        -- from this seq on h_shard the transfer is known over (done/error/notification)
--   h_blind BOOLEAN       -- a remote end whose home shard is not ordered before the post's, or is cut
--   h_unknown BOOLEAN     -- the holding cannot be decided (unordered, or past a cut)
--   alloc_seq, free_seq, release_seq, gen_seq, page BIGINT  -- the holding (null: none)
--   sk, lk UBIGINT        -- join keys of the slot and slot layer on h_shard (see slot_ev)
CREATE OR REPLACE VIEW end_hold AS
SELECT n.shards[e.psidx + 1] AS shard, e.xfer, e.pos, CASE WHEN e.dst THEN 'dst' ELSE 'src' END AS side,
       n.agents[e.aid] AS agent, e.addr, e.nbytes, n.pools[e.pid] AS pool, e.layer, n.parts[e.part_id] AS part,
       e.slot, e.off, e.slot_bytes, e.crosses, e.dlist, e.idx, e.request, e.post_seq, e.psidx, e.bound, e.t_ns,
       n.shards[e.h_sidx + 1] AS h_shard, e.h_sidx, e.managed, e.seen_seq, e.end_seq, e.h_blind, e.h_unknown,
       e.alloc_seq, e.free_seq, e.release_seq, e.gen_seq, e.page, e.sk, e.lk
FROM end_hold_ids e, id_names n;
