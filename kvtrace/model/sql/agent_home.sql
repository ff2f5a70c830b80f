-- agent_home: the shard each agent lives on (the shard recording most of its events).
-- requires: events, shards
-- Columns: agent VARCHAR, h_shard VARCHAR, h_sidx INTEGER
CREATE OR REPLACE TABLE agent_home AS
SELECT agent, arg_max(shard, n) AS h_shard, arg_max(sidx, n) AS h_sidx
FROM (SELECT agent, shard, count(*) AS n FROM events WHERE agent IS NOT NULL GROUP BY ALL) c
JOIN shards USING (shard) GROUP BY agent;
