-- mem_ranges: the memory each agent gave NIXL outside the layouts' view: every prepared
-- descriptor list entry (by shard, list, index), then every registered region (register
-- events with an address and a size, every recorded one, by shard name and seq).
-- Readers that re-create memory (replay) cut cells from these; layouts win where they cover.
-- Needs: shards (derived)
-- Columns: agent VARCHAR, addr UBIGINT, nbytes UBIGINT
SELECT agent, addr, nbytes FROM (
    SELECT 0 AS src, s.sidx, NULL::VARCHAR AS shard, d.dlist, d.idx, NULL::BIGINT AS seq, d.agent, d.addr, d.nbytes
    FROM dlists d JOIN shards s USING (shard)
    UNION ALL
    SELECT 1, NULL, shard, NULL, NULL, seq, agent, addr, nbytes
    FROM recorded_events WHERE kind = 'register' AND addr IS NOT NULL AND nbytes > 0
) ORDER BY src, sidx, dlist, idx, shard, seq
