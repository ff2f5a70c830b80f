-- page_rows: the timeline rows at the ords $ords (one page of a filtered view, between
-- $lo and $hi so the scan prunes row groups), in ord order; the columns of source.COLUMNS.
SELECT ord, shard, seq, t_ns, agent, kind, request, pool, layer, slots,
       xfer, peer, addr, nbytes, status, msg, detail, pair_shard, pair_seq, pair_xfer
FROM tl WHERE ord >= $lo::BIGINT AND ord <= $hi::BIGINT AND ord IN (SELECT unnest($ords::BIGINT[]))
ORDER BY ord
