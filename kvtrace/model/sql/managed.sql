-- managed: the (agent, pool)s whose slots an allocator hands out, as seen where the agent
-- lives: they have alloc events on the agent's home shard. Ownership checks apply only there.
-- Allocations recorded only by another process (vLLM's scheduler naming its worker's agent)
-- cannot be ordered with that agent's posts and reads by this model: such a pool is left
-- unmanaged (its bytes are still checked) and queries/allocs_elsewhere.sql says so (cut.py notes it).
-- From slot_life's alloc rows (slot_ev's, already stored), not the slot_ev view, which would
-- read and unnest the events once more (10M events: ~0.6 cpu-s).
-- requires: slot_life, agent_home
-- Columns: agent VARCHAR, pool VARCHAR
CREATE OR REPLACE TABLE managed AS
SELECT DISTINCT e.agent, e.pool FROM slot_life e JOIN agent_home a ON a.agent = e.agent AND a.h_shard = e.shard
WHERE e.kind = 'alloc';
