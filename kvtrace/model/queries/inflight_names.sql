-- inflight_names: the names behind the ids of inflight_ends.sql (id_names): shards[psidx + 1],
-- agents[agent_code], pools[pid], with which inflight_pairs (inflight.py) names its pairs.
-- Columns: shards, agents, pools VARCHAR[]
SELECT shards, agents, pools FROM id_names
