-- inflight_ends: the descriptor ends inflight_pairs (inflight.py) sweeps: every end with
-- an agent and an address (the others have no neighbours), with what a pair reports.
-- Columns: agent, shard, side, request, pool VARCHAR, addr, nbytes UBIGINT, t_ns, post_seq BIGINT,
--   pos INTEGER, xfer BIGINT, psidx INTEGER, layer INTEGER, slot BIGINT
SELECT agent, shard, side, request, pool, addr, nbytes, t_ns, post_seq, pos, xfer, psidx, layer, slot
FROM end_hold WHERE agent IS NOT NULL AND addr IS NOT NULL
