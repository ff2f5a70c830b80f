-- unknown_ends: descriptor ends whose request's holding cannot be decided (end_hold.h_unknown),
-- per agent whose memory they touch, transfer initiator and reason.
-- Columns: agent VARCHAR, home VARCHAR (its shard), initiator VARCHAR (the posts' shard),
--   why VARCHAR ('no_request': the transfers carry no request; 'unordered': none of the
--   home shard's events is ordered before the initiator's, no message from it was
--   recorded; 'unordered_alloc': the allocation is not ordered with the post, or lies
--   past a cut), n BIGINT (ends), transfers BIGINT
SELECT e.agent, e.h_shard AS home, e.shard AS initiator,
       CASE WHEN e.request IS NULL THEN 'no_request'
            WHEN o.from_sidx IS NULL AND e.h_sidx IS DISTINCT FROM e.psidx THEN 'unordered'
            ELSE 'unordered_alloc' END AS why,
       count(*) AS n, count(DISTINCT e.xfer) AS transfers
FROM end_hold e LEFT JOIN shard_order o ON o.from_sidx = e.h_sidx AND o.to_sidx = e.psidx
WHERE e.h_unknown
GROUP BY ALL ORDER BY e.agent, e.shard, why;
