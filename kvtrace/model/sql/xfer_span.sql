-- xfer_span: one row per transfer with the timeline positions of its events, so a viewer's
-- inspector and in-flight test never scan the whole timeline.
-- requires: timeline
-- Columns:
--   shard VARCHAR, xfer BIGINT  -- the transfer (initiator shard, id)
--   request VARCHAR    -- request key of its post
--   post_ord BIGINT    -- its xfer_post (null: descriptors or completions without a post)
--   end_ord BIGINT     -- first event that ends it on some side: xfer_done / xfer_error /
--                         xfer_release by the initiator, or a notification paired with the post
--   ords BIGINT[]      -- every event of the transfer (post, completions, notifications, moves)
CREATE OR REPLACE TABLE xfer_span AS
WITH ev AS (
    SELECT shard, xfer, ord, kind, request FROM timeline WHERE xfer IS NOT NULL
    UNION ALL
    SELECT pair_shard, pair_xfer, ord, kind, request FROM timeline WHERE pair_xfer IS NOT NULL
)
SELECT shard, xfer,
       any_value(request) FILTER (WHERE kind = 'xfer_post') AS request,
       min(ord) FILTER (WHERE kind = 'xfer_post') AS post_ord,
       min(ord) FILTER (WHERE kind IN ('xfer_done', 'xfer_error', 'xfer_release', 'notif_recv')) AS end_ord,
       list(ord ORDER BY ord) AS ords
FROM ev GROUP BY shard, xfer;
