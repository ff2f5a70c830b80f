-- tui_xfers: one row per posted transfer with the timeline positions of its events, so
-- the inspector and the slot map's in-flight test never scan the 10M-row timeline.
-- Columns:
--   shard, xfer   the transfer (initiator shard, id)
--   request       request key of its post
--   post_ord      its xfer_post (null: descriptors or completions without a post)
--   end_ord       first event that ends it on some side: xfer_done / xfer_error /
--                 xfer_release by the initiator, or a notification paired with the post
--   ords          every event of the transfer (post, completions, notifications, moves)
COPY (
    WITH ev AS (
        SELECT shard, xfer, ord, kind, request FROM read_parquet('{events}') WHERE xfer IS NOT NULL
        UNION ALL
        SELECT pair_shard, pair_xfer, ord, kind, request FROM read_parquet('{events}') WHERE pair_xfer IS NOT NULL
    )
    SELECT shard, xfer,
           any_value(request) FILTER (WHERE kind = 'xfer_post') AS request,
           min(ord) FILTER (WHERE kind = 'xfer_post') AS post_ord,
           min(ord) FILTER (WHERE kind IN ('xfer_done', 'xfer_error', 'xfer_release', 'notif_recv')) AS end_ord,
           list(ord ORDER BY ord) AS ords
    FROM ev GROUP BY shard, xfer
    ORDER BY post_ord
) TO '{out}' (FORMAT parquet, COMPRESSION zstd)
