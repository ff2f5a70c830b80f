-- unheld_descs: descriptors whose (pool, layer, page) match cannot be decided because one
-- end's agent recorded no holding at all of the transfer's request (desc_match.unheld),
-- per such agent and transfer initiator.
-- Columns: agent VARCHAR (the agent with no holdings), initiator VARCHAR (the posts' shard),
--   n BIGINT (descriptors), transfers BIGINT, requests BIGINT
SELECT agent, initiator, count(*) AS n, count(DISTINCT xfer) AS transfers, count(DISTINCT request) AS requests
FROM (SELECT shard AS initiator, xfer, request, unheld AS agent FROM desc_match WHERE unheld IS NOT NULL)
GROUP BY ALL ORDER BY agent, initiator;
