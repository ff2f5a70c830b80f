-- export_xfers: one row per posted transfer, spanning from its post to the initiator's
-- first completion observation (xfer_done / xfer_error); a transfer never observed
-- complete ends at its release, else has a null end (the exporter ends it at trace end).
-- Columns:
--   shard, xfer         the transfer's identity (every posting has its own xfer)
--   agent, peer         the initiator and the other side
--   request             the request that posted it
--   op                  WRITE | READ as posted (from its descriptors)
--   ndescs, nbytes      descriptor count and bytes posted
--   msg                 the notification payload carried (null: none)
--   post_seq, t_post    the xfer_post event
--   end_seq, t_end      the completion (or release) event; null when never seen
--   end_kind            xfer_done | xfer_error | xfer_release | null
WITH ends AS (
    SELECT shard, xfer, seq, t_ns, kind,
           row_number() OVER (PARTITION BY shard, xfer
                              ORDER BY (kind = 'xfer_release'), seq) AS rn
    FROM events
    WHERE kind IN ('xfer_done', 'xfer_error', 'xfer_release') AND xfer IS NOT NULL
), d AS (
    SELECT shard, xfer, any_value(op) AS op, count(*) AS ndescs
    FROM descs GROUP BY shard, xfer
)
SELECT p.shard, p.xfer, p.agent, p.peer, p.request,
       coalesce(d.op, json_extract_string(p.detail, '$.op')) AS op,
       coalesce(d.ndescs, 0) AS ndescs, p.nbytes, p.msg,
       p.seq AS post_seq, p.t_ns AS t_post,
       e.seq AS end_seq, e.t_ns AS t_end, e.kind AS end_kind
FROM events p
LEFT JOIN ends e ON e.shard = p.shard AND e.xfer = p.xfer AND e.rn = 1 AND e.seq > p.seq
LEFT JOIN d ON d.shard = p.shard AND d.xfer = p.xfer
WHERE p.kind = 'xfer_post'
ORDER BY p.shard, p.seq
