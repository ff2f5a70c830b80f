-- managed: the (agent, pool)s whose slots an allocator hands out (they have alloc events);
-- ownership checks apply only there.
-- requires: slot_ev
-- Columns: agent VARCHAR, pool VARCHAR
CREATE OR REPLACE TABLE managed AS
SELECT DISTINCT agent, pool FROM slot_ev WHERE kind = 'alloc';
