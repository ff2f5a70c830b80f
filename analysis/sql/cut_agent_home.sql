-- query cut_agent_home: the shard that records each agent's own events (the one where it
-- appears most as the acting agent).
-- Columns: agent VARCHAR, shard VARCHAR
SELECT agent, arg_max(shard, n) AS shard
FROM (SELECT agent, shard, count(*) AS n FROM events WHERE agent IS NOT NULL GROUP BY ALL)
GROUP BY agent;
