-- writes_ids: writes' rows (the rule is here), stored with the shard and the agent as small
-- integer ids (sidx, aid) in place of their names; the view writes gives the names back
-- (id_names). A name column costs ~0.35 cpu-s to write per 6.8M rows (10M events), an
-- integer ~0.05 (the Parquet writer's dictionary hashes every string); the shard's name was
-- stored beside its sidx. The derivation's hot readers (reads_ids, read_predict_ids,
-- inflight_writes) read integers only and read this table; the checks read writes.
-- requires: slot_ev, agent_ids
-- Columns: writes', with aid INTEGER (agent_ids; writes.agent) and no shard:
--   sidx, seq, aid, request, pool, layer, slot, page, checksum, src_request, sk, lk
CREATE OR REPLACE TABLE writes_ids AS
SELECT e.sidx, e.seq, a.aid, e.request, e.pool, e.layer, e.slot, e.page, e.checksum, e.src_request, e.sk, e.lk
FROM slot_ev e LEFT JOIN agent_ids a ON a.agent = e.agent
WHERE e.kind = 'write';
