-- end_hold_ids: every descriptor end with its transfer's post, home shard and holding, one row
-- per end, in small integer ids (end_hold gives the names back): desc_hold_ids' ends (derived
-- there, both ends of a descriptor side by side), each read once. For the readers that want
-- the ends one by one (inflight_pairs' sweep, read_undelivered, end_hold); a reader of both
-- ends of a descriptor reads desc_hold_ids instead of joining the two rows here.
-- requires: desc_hold_ids, agent_ids, id_names
-- Columns (end_hold's, with these in place of its names):
--   dst BOOLEAN           -- the destination end (end_hold.side = 'dst'; else 'src')
--   aid INTEGER           -- the end's agent (agent_ids)
--   pid, part_id INTEGER  -- its pool and part (lay)
--   psidx, h_sidx INTEGER -- the initiator and home shards (shards.sidx), as in end_hold
--   the rest as end_hold: xfer, pos, addr, nbytes, layer, slot, off, slot_bytes, crosses, dlist, idx,
--   request, post_seq, bound, t_ns, managed, seen_seq, end_seq, h_blind, sk, lk, h_unknown,
--   alloc_seq, free_seq, release_seq, gen_seq, page (in this order)
-- crosses and sk are computed here, not stored (desc_hold_ids): each only where a reader asks
-- for it, as desc_ends and desc_hold_ids would have (the names of the ids by list lookups in
-- one row each: agent_ids' homes and names by aid, lay's pools by pid)
CREATE OR REPLACE VIEW end_hold_ids AS
SELECT xfer, pos, false AS dst, s_aid AS aid, s_addr AS addr, nbytes, s_pid AS pid, s_layer AS layer,
       s_part_id AS part_id, s_slot AS slot, s_off AS off, s_slot_bytes AS slot_bytes,
       -- desc_ends' crosses: off is null where no region covers the end (off < slot_bytes, so
       -- the UBIGINT sum is desc_ends' own)
       coalesce(s_off::UBIGINT + nbytes > s_slot_bytes, false) AS crosses,
       s_dlist AS dlist, s_idx AS idx, request, post_seq, psidx, s_bound AS bound, t_ns, s_h_sidx AS h_sidx,
       s_managed AS managed, s_seen_seq AS seen_seq, s_end_seq AS end_seq, s_h_blind AS h_blind,
       hash((SELECT list(h_shard ORDER BY aid) FROM agent_ids)[s_aid], (SELECT list(agent ORDER BY aid) FROM agent_ids)[s_aid],
            (SELECT pools FROM id_names)[s_pid], s_slot) AS sk,
       s_lk AS lk, s_h_unknown AS h_unknown, s_alloc_seq AS alloc_seq, s_free_seq AS free_seq,
       s_release_seq AS release_seq, s_gen_seq AS gen_seq, s_page AS page
FROM desc_hold_ids WHERE d_first   -- each source end once (with its destination end's first region)
UNION ALL
SELECT xfer, pos, true, d_aid, d_addr, nbytes, d_pid, d_layer, d_part_id, d_slot, d_off, d_slot_bytes,
       coalesce(d_off::UBIGINT + nbytes > d_slot_bytes, false),
       d_dlist, d_idx, request, post_seq, psidx, d_bound, t_ns, d_h_sidx, d_managed, d_seen_seq, d_end_seq,
       d_h_blind,
       hash((SELECT list(h_shard ORDER BY aid) FROM agent_ids)[d_aid], (SELECT list(agent ORDER BY aid) FROM agent_ids)[d_aid],
            (SELECT pools FROM id_names)[d_pid], d_slot),
       d_lk, d_h_unknown, d_alloc_seq, d_free_seq, d_release_seq, d_gen_seq, d_page
FROM desc_hold_ids WHERE s_first;
