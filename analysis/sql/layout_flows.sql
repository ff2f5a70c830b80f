-- query layout_flows: the buffer classes transfers copy from one agent to another, per layer
-- (the source end's), with how many descriptors do so and how many run past a slot on one
-- side only (a pool's layers may differ in geometry: layouts.py compares them layer by layer).
-- Columns: src_agent, dst_agent, pool VARCHAR, part VARCHAR ('' without part), layer INTEGER,
--   descs BIGINT, uneven BIGINT, requests BIGINT
SELECT s.agent AS src_agent, d.agent AS dst_agent, s.pool, coalesce(s.part, '') AS part, s.layer, count(*) AS descs,
       count(*) FILTER (WHERE s.crosses <> d.crosses) AS uneven, count(DISTINCT s.request) AS requests
FROM end_hold s JOIN end_hold d ON d.shard = s.shard AND d.xfer = s.xfer AND d.pos = s.pos AND d.side = 'dst'
WHERE s.side = 'src' AND s.pool IS NOT NULL AND d.pool = s.pool AND coalesce(d.part, '') = coalesce(s.part, '')
  AND s.agent <> d.agent
GROUP BY ALL ORDER BY ALL;
