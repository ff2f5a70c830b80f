-- desc_match: every descriptor with both ends side by side, and whether it copies the same
-- (pool, layer, page) of its request from source to destination — the one rule of
-- descriptor correctness, read by the layer_offset_mismatch check and the TUI inspector.
-- Derived in desc_match_ids (the rule is there), which stores small integer ids in place of
-- the names; this view gives the names back (id_names).
-- requires: desc_match_ids, id_names
-- Columns:
--   shard VARCHAR, xfer BIGINT, pos INTEGER, request VARCHAR, post_seq BIGINT, nbytes UBIGINT
--   s_agent, s_addr, s_pool, s_layer, s_part, s_slot, s_off, s_slot_bytes, s_page, s_managed, s_dlist, s_idx
--   d_agent, d_addr, d_pool, d_layer, d_part, d_slot, d_off, d_slot_bytes, d_page, d_managed, d_dlist, d_idx
--                       -- the source / destination end, as end_hold resolves it
--   checked BOOLEAN     -- the rule applies (see above)
--   unheld VARCHAR      -- the rule would apply, but this end's agent recorded no holding of the
--                          request: the match is unknown (null: not so)
--   ok BOOLEAN          -- checked and both ends are the same (pool, layer, part, tokens)
--   dup BOOLEAN         -- ok, but its destination bytes are covered twice within the transfer
--   problem VARCHAR     -- why the descriptor is wrong (null: it is not, or the rule does not apply)
CREATE OR REPLACE VIEW desc_match AS
SELECT n.shards[m.psidx + 1] AS shard, m.xfer, m.pos, m.request, m.post_seq, m.nbytes,
       n.agents[m.s_aid] AS s_agent, m.s_addr, n.pools[m.s_pid] AS s_pool, m.s_layer, n.parts[m.s_part_id] AS s_part,
       m.s_slot, m.s_off, m.s_slot_bytes, m.s_page, m.s_managed, m.s_dlist, m.s_idx,
       n.agents[m.d_aid] AS d_agent, m.d_addr, n.pools[m.d_pid] AS d_pool, m.d_layer, n.parts[m.d_part_id] AS d_part,
       m.d_slot, m.d_off, m.d_slot_bytes, m.d_page, m.d_managed, m.d_dlist, m.d_idx,
       m.checked, n.agents[m.unheld_aid] AS unheld, m.ok, m.dup, m.problem
FROM desc_match_ids m, id_names n;
