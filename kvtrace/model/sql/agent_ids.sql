-- agent_ids: every agent a descriptor end or an event names, with a small integer id (the
-- narrow tables, desc_hold_ids, store it instead of the name) and its home (agent_home; null:
-- it recorded no event).
-- requires: agent_home, descs
-- Columns: agent VARCHAR, aid INTEGER (1-based, in name order), h_shard VARCHAR, h_sidx INTEGER
CREATE OR REPLACE TABLE agent_ids AS
WITH a AS (
    SELECT agent FROM agent_home
    UNION SELECT src_agent FROM descs WHERE src_agent IS NOT NULL
    UNION SELECT dst_agent FROM descs WHERE dst_agent IS NOT NULL
)
SELECT a.agent, row_number() OVER (ORDER BY a.agent)::INTEGER AS aid, h.h_shard, h.h_sidx
FROM a LEFT JOIN agent_home h USING (agent);
