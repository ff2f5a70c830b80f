-- inflight_requests: the request of each transfer (?: the initiator shards' sidx, ?: the
-- transfer ids, two lists of one length) that an in-flight pair names: end_hold's request
-- is its transfer's (xfers.request), looked up only for the pairs (inflight.py).
-- Columns: sidx INTEGER, xfer BIGINT, request VARCHAR
SELECT x.sidx, x.xfer, x.request
FROM (SELECT unnest(?::INTEGER[]) AS sidx, unnest(?::BIGINT[]) AS xfer) k
JOIN xfers x ON x.sidx = k.sidx AND x.xfer = k.xfer
