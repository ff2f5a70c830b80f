-- managed: the (agent, pool)s whose slots an allocator hands out, as seen where the agent
-- lives: they have alloc events on the agent's home shard. Ownership checks apply only there.
-- Allocations recorded only by another process (vLLM's scheduler naming its worker's agent)
-- cannot be ordered with that agent's posts and reads by this model: such a pool is left
-- unmanaged (its bytes are still checked) and queries/allocs_elsewhere.sql says so (cut.py notes it).
-- From slot_life_ids' alloc rows (slot_ev's, already stored), not the slot_ev view, which would
-- read and unnest the events once more (10M events: ~0.6 cpu-s); by the agent's id and home
-- shard index (agent_ids: agent_home's), the agent named once per (agent, pool).
-- requires: slot_life_ids, agent_ids, id_names
-- Columns: agent VARCHAR, pool VARCHAR
CREATE OR REPLACE TABLE managed AS
SELECT n.agents[m.aid] AS agent, m.pool
FROM (SELECT DISTINCT e.aid, e.pool FROM slot_life_ids e JOIN agent_ids a ON a.aid = e.aid AND a.h_sidx = e.sidx
      WHERE e.alloc) m, id_names n;
