-- xfers: one row per posted transfer, with its initiator-side outcome and what the
-- post knows (happens-before) about every shard.
-- requires: events, descs, shards, clocks
-- Columns:
--   shard VARCHAR, sidx INTEGER, xfer BIGINT  -- the transfer's identity (initiator shard)
--   post_seq BIGINT      -- the xfer_post event
--   t_ns BIGINT          -- its timestamp (only to order candidate pairs, never to decide a hazard)
--   agent VARCHAR        -- initiator agent
--   peer VARCHAR         -- the other agent
--   request VARCHAR      -- request key of the post
--   msg BLOB             -- notification payload
--   op VARCHAR           -- WRITE | READ
--   ndesc BIGINT         -- descriptor rows
--   done_seq, err_seq, release_seq BIGINT  -- first xfer_done / xfer_error / xfer_release
--   know BIGINT[]        -- know[j+1] = largest seq of shard j that happens-before the post
CREATE OR REPLACE TABLE xfers AS
WITH p AS (
    SELECT e.shard, s.sidx, e.xfer, e.seq AS post_seq, e.agent, e.peer, e.request, e.msg,
           e.t_ns, json_extract_string(e.detail, '$.op') AS op_detail
    FROM events e JOIN shards s USING (shard) WHERE e.kind = 'xfer_post'
), pk AS (
    SELECT p.*, k.vc FROM p ASOF LEFT JOIN clocks k ON p.shard = k.shard AND p.post_seq >= k.seq
), c AS (
    SELECT shard, xfer,
           min(seq) FILTER (WHERE kind = 'xfer_done') AS done_seq,
           min(seq) FILTER (WHERE kind = 'xfer_error') AS err_seq,
           min(seq) FILTER (WHERE kind = 'xfer_release') AS release_seq
    FROM events WHERE kind IN ('xfer_done', 'xfer_error', 'xfer_release') GROUP BY ALL
), o AS (
    SELECT shard, xfer, any_value(op) AS op, count(*) AS ndesc FROM descs GROUP BY ALL
)
SELECT pk.shard, pk.sidx, pk.xfer, pk.post_seq, pk.t_ns, pk.agent, pk.peer, pk.request, pk.msg,
       coalesce(o.op, pk.op_detail, 'WRITE') AS op, coalesce(o.ndesc, 0) AS ndesc,
       c.done_seq, c.err_seq, c.release_seq,
       list_transform(range((SELECT count(*) FROM shards)), lambda i:
           CASE WHEN i = pk.sidx THEN pk.post_seq - 1 ELSE coalesce(pk.vc[i + 1], -1) END) AS know
FROM pk LEFT JOIN c USING (shard, xfer) LEFT JOIN o USING (shard, xfer);
