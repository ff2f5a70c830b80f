-- follow_reference: the events n/p may land on, asked plainly of the timeline file (tl) for
-- tests/tui/test_tui_follow.py: every event that names the key ($kind 'request': $request;
-- 'slot': $agent, $pool and $slot among its slots; 'xfer': its own or its paired send's
-- ($xshard, $xfer)), in order; $visible: NULL, or the ords a filter keeps.
SELECT DISTINCT ord FROM (
    SELECT ord FROM tl WHERE $kind::VARCHAR = 'request' AND request = $request::VARCHAR
    UNION ALL
    SELECT ord FROM (SELECT ord, agent, pool, unnest(slots) AS slot FROM tl)
    WHERE $kind::VARCHAR = 'slot' AND agent = $agent::VARCHAR AND pool = $pool::VARCHAR AND slot = $slot::BIGINT
    UNION ALL
    SELECT ord FROM tl
    WHERE $kind::VARCHAR = 'xfer' AND ((shard = $xshard::VARCHAR AND xfer = $xfer::BIGINT)
                                       OR (pair_shard = $xshard::VARCHAR AND pair_xfer = $xfer::BIGINT)))
WHERE $visible::BIGINT[] IS NULL OR list_contains($visible::BIGINT[], ord)
ORDER BY ord
