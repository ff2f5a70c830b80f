-- inflight_ends_range: the ends of inflight_ends.sql of one agent (?: its id, end_hold_ids.aid)
-- whose address lies in 64 KiB buckets [?, ?) (see inflight_blocks.sql).
-- Columns: as inflight_ends.sql
SELECT aid AS agent_code, psidx, xfer, pos, CASE WHEN dst THEN 0 ELSE 1 END AS side_code,
       addr, nbytes, t_ns, post_seq, pid, layer, slot
FROM end_hold_ids WHERE aid = ? AND addr // 65536 >= ? AND addr // 65536 < ?
