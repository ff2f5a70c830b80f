-- id_names: the names behind the small integer ids the narrow tables store (desc_hold_ids,
-- desc_match_ids, read_predict_ids), one row of lists: shards[sidx + 1], agents[aid], pools[pid], parts[part_id]
-- (a null id, or one past the end, gives a null name). The views end_hold and desc_match read
-- their names here, so each dictionary is derived once, from shards, agent_ids and lay.
-- requires: shards, agent_ids, lay
-- Columns: shards, agents, pools, parts VARCHAR[]
CREATE OR REPLACE TABLE id_names AS
SELECT (SELECT list(shard ORDER BY sidx) FROM shards) AS shards,
       (SELECT list(agent ORDER BY aid) FROM agent_ids) AS agents,
       (SELECT list(pool ORDER BY pid) FROM (SELECT DISTINCT pool, pid FROM lay WHERE pid IS NOT NULL)) AS pools,
       (SELECT list(part ORDER BY part_id) FROM (SELECT DISTINCT part, part_id FROM lay WHERE part_id IS NOT NULL)) AS parts;
