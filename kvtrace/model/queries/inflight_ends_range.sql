-- inflight_ends_range: the ends of inflight_ends.sql of one agent (?) whose address lies
-- in 64 KiB buckets [?, ?) (see inflight_blocks.sql).
-- Columns: as inflight_ends.sql (agent_code 1: one agent)
SELECT agent, shard, side, request, pool, addr, nbytes, t_ns, post_seq, pos, xfer, psidx, layer, slot,
       1::BIGINT AS agent_code, CASE side WHEN 'dst' THEN 0 WHEN 'src' THEN 1 END AS side_code
FROM end_hold WHERE agent = ? AND addr // 65536 >= ? AND addr // 65536 < ?
