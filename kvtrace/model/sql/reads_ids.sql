-- reads_ids: one row per (read event, slot) with the reader's holding of the slot
-- (the reader's latest alloc of it before the read on the same shard): reads' rows (the rules
-- are here), stored with the shard and the agent as small integer ids (sidx, aid) in place of
-- their names; the view reads gives the names back (id_names). A name column costs ~0.35
-- cpu-s to write per 6.8M rows (10M events), an integer ~0.05 (the Parquet writer's dictionary
-- hashes every string); the shard's name was stored beside its sidx. The derivation's hot
-- reader (read_predict_ids) reads integers only and reads this table; the checks read reads.
-- requires: slot_ev, holding_list, writes, managed, events, agent_ids
-- Columns: reads', with aid INTEGER (agent_ids; reads.agent) and no shard:
--   sidx INTEGER, seq BIGINT, aid INTEGER, request, pool VARCHAR, layer INTEGER, slot BIGINT
--   page BIGINT, checksum UBIGINT   -- what the consumer saw
--   sk, lk UBIGINT                  -- join keys (see slot_ev)
--   alloc_seq, free_seq, gen_seq BIGINT  -- the reader's holding (null: it holds none)
--   managed BOOLEAN                 -- the pool has alloc events on that agent
--   lw_seq BIGINT, lw_ck UBIGINT, lw_req VARCHAR  -- the latest local write of the slot layer
--                                      before the read (null: none); computed once here,
--                                      several checks need it
CREATE OR REPLACE TABLE reads_ids AS
WITH r AS (
    -- the holding: one hash join on hk to the request's holdings of the slot (a list ordered by
    -- alloc, almost always one), then the last alloc before the read (an ASOF join to holdings
    -- sorted every read by hk)
    SELECT r.*, CASE WHEN len(k.hl) = 1 THEN CASE WHEN k.hl[1].a < r.seq THEN k.hl[1] END
                     ELSE list_filter(k.hl, lambda h: h.a < r.seq)[-1] END AS h
    -- (holding_list is the hash join's build side: 1 row per (slot, request), ~4x fewer than the
    -- reads. DuckDB estimates the reads of the events at a fraction of them and would build on the
    -- ~7M wide read rows; the always-true len(hl) > 0 (a holding list is never empty) lowers
    -- holding_list's estimate so it builds there: ~-2 of ~10 cpu-s at 10M, same rows)
    FROM (SELECT * FROM slot_ev WHERE kind = 'read') r
    LEFT JOIN (SELECT hk, hl FROM holding_list WHERE len(hl) > 0) k ON k.hk = r.hk
), pools AS (
    -- the (shard, agent, pool)s both written and read (a few per trace; none where a consumer
    -- only reads what it receives), as one list of keys in one row. hash() keys: a collision
    -- only lets more rows into the ASOF join, whose lk decides
    SELECT coalesce(list(h) FILTER (WHERE w AND r), []) AS both_pools FROM (
        SELECT hash(shard, agent, pool) AS h, bool_or(kind = 'write') AS w, bool_or(kind = 'read') AS r
        FROM events WHERE kind IN ('write', 'read') GROUP BY h)
), meet AS (
    -- those keys as rows: the hash joins below build on them. DuckDB estimates the unnest of
    -- a one-row CTE as small, so it never builds on the reads or the writes (a semi join on a
    -- DISTINCT, whose few rows it cannot estimate, built on every read row: out of memory at
    -- 100M events under 3 GB); and with none to build on, it never scans them (10M events,
    -- no pool both written and read: ~-1 of reads' ~4.4 cpu-s, the scans of the reads' events
    -- and of writes, and a hash of three strings per row, skipped)
    SELECT unnest(both_pools) AS h FROM pools
), lw AS (
    -- the latest local write before each read's (slot layer, seq), on those two integers only,
    -- joined back by them (the ASOF join then sorts two integers per read, not the whole row).
    -- A slot layer's key names its (shard, agent, pool), so a read and a write can meet only in
    -- a pool both written and read on the same agent: both sides are cut to those pools first,
    -- and the ASOF join sorts only what can match (a consumer that only reads what it receives:
    -- no row; at 10M the ASOF over every read and write that never meet cost ~2.5 of reads'
    -- ~11 cpu-s)
    SELECT r.lk, r.seq, w.seq AS w_seq, w.checksum AS w_ck, w.request AS w_req
    FROM (SELECT DISTINCT e.lk, e.seq FROM slot_ev e JOIN meet b ON b.h = hash(e.shard, e.agent, e.pool)
          WHERE e.kind = 'read') r
    ASOF JOIN (SELECT w.lk, w.seq, w.checksum, w.request FROM writes w
               JOIN meet b ON b.h = hash(w.shard, w.agent, w.pool)) w
        ON w.lk = r.lk AND r.seq > w.seq
)
SELECT r.sidx, r.seq, a.aid, r.request, r.pool, r.layer, r.slot, r.page, r.checksum, r.sk, r.lk,
       r.h.a AS alloc_seq, r.h.f AS free_seq, r.h.g AS gen_seq, m.pool IS NOT NULL AS managed,
       w.w_seq AS lw_seq, w.w_ck AS lw_ck, w.w_req AS lw_req
FROM r LEFT JOIN lw w ON w.lk = r.lk AND w.seq = r.seq
LEFT JOIN managed m ON m.agent = r.agent AND m.pool = r.pool
LEFT JOIN agent_ids a ON a.agent = r.agent;
