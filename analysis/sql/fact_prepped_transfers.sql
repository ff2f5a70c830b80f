-- fact: prepped_transfers
-- counts: transfers posted from prepared (indexed) descriptor lists
-- absent: the trace has no prepped (indexed) transfers
-- requires: descs
SELECT count(DISTINCT (shard, xfer)) AS n FROM descs WHERE dst_idx IS NOT NULL OR src_idx IS NOT NULL
