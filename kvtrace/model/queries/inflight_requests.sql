-- inflight_requests: the request of each posting (?: the initiator shards' sidx, ?: the
-- transfer ids, ?: the posts' seqs, three lists of one length) that an in-flight pair names:
-- end_hold's request is its posting's (xfers.request), looked up only for the pairs
-- (inflight.py). The post's seq is part of the key: a transfer id posted twice in one shard
-- (an untrusted trace) has one xfers row per posting, each with its own request.
-- Columns: sidx INTEGER, xfer BIGINT, post_seq BIGINT, request VARCHAR
SELECT x.sidx, x.xfer, x.post_seq, x.request
FROM (SELECT unnest(?::INTEGER[]) AS sidx, unnest(?::BIGINT[]) AS xfer, unnest(?::BIGINT[]) AS post_seq) k
JOIN xfers x ON x.sidx = k.sidx AND x.xfer = k.xfer AND x.post_seq = k.post_seq
