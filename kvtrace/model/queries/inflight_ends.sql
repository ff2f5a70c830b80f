-- inflight_ends: the descriptor ends inflight_pairs (inflight.py) sweeps: every end with
-- an agent and an address (the others have no neighbours), as integers only (end_hold_ids:
-- the sweep sorts and compares by them, and names only the pairs it returns, inflight_names
-- and inflight_requests; reading the names of 13.6M ends from end_hold cost ~4 of the
-- sweep's ~10 cpu-s at 10M events).
-- Columns: agent_code INTEGER (end_hold_ids.aid: equal agents, equal codes), psidx INTEGER,
--   xfer BIGINT, pos INTEGER, side_code INTEGER (0 dst, 1 src: end_hold's side in name order),
--   addr, nbytes UBIGINT, t_ns, post_seq BIGINT, pid INTEGER (the pool's id), layer INTEGER, slot BIGINT
SELECT aid AS agent_code, psidx, xfer, pos, CASE WHEN dst THEN 0 ELSE 1 END AS side_code,
       addr, nbytes, t_ns, post_seq, pid, layer, slot
FROM end_hold_ids WHERE aid IS NOT NULL AND addr IS NOT NULL
