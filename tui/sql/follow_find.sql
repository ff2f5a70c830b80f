-- follow_find: while n/p's posting lists (kvtrace/model/follow_index.py) are not built yet,
-- the next ($forward) or previous visible event after ord $after that shares what n/p
-- follow: a request ($request), a slot ($agent, $pool, $slot) or a transfer ($xshard,
-- $xfer: its events and the receives paired with it). Fields that are NULL do
-- not restrict; source.py sets exactly one group. With $filtered only rows the filter
-- keeps (tui_visible) count.
SELECT CASE WHEN $forward::BOOLEAN THEN min(ord) FILTER (WHERE ord > $after::BIGINT)
            ELSE max(ord) FILTER (WHERE ord < $after::BIGINT) END AS ord
FROM tl
WHERE ($request::VARCHAR IS NULL OR request = $request::VARCHAR)
  AND ($agent::VARCHAR IS NULL OR (agent = $agent::VARCHAR AND pool = $pool::VARCHAR
                                   AND list_contains(slots, $slot::BIGINT)))
  AND ($xshard::VARCHAR IS NULL OR (shard = $xshard::VARCHAR AND xfer = $xfer::BIGINT)
       OR (pair_shard = $xshard::VARCHAR AND pair_xfer = $xfer::BIGINT))
  AND (NOT $filtered::BOOLEAN OR ord IN (SELECT ord FROM tui_visible))
