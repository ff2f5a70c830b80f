-- slot_ev: alloc/free/write/read events, one row per slot touched.
-- requires: events, shards
-- Columns:
--   shard VARCHAR, sidx INTEGER, seq BIGINT, agent VARCHAR, kind VARCHAR, request VARCHAR
--   pool VARCHAR, layer INTEGER (write/read), slot BIGINT
--   page BIGINT          -- the slot's page ordinal within the request (alloc/write/read)
--   checksum UBIGINT     -- kvh64 written or seen (write/read)
--   shared BOOLEAN       -- alloc of a prefix-cache reference (detail.shared)
--   src_request VARCHAR  -- write copying another request's data (detail.src_request)
--   sk, lk, hk UBIGINT   -- join keys: hash of (shard, agent, pool, slot), + layer, + request
--                          (one integer key makes ASOF and hash joins several times faster)
-- A view, not a table: each reader takes its kinds (slot_life alloc/free, reads read, writes
-- write), so every row is computed about once where it is read, and storing 1.7M rows at 1M
-- events only cost time (~0.35 cpu-s). A reader's kind filter reaches the events scan.
CREATE OR REPLACE VIEW slot_ev AS
SELECT shard, sidx, seq, agent, kind, request, pool, layer, slot, page, checksum,
       hash(shard, agent, pool, slot) AS sk, hash(shard, agent, pool, layer, slot) AS lk,
       hash(shard, agent, pool, slot, request) AS hk,
       coalesce(kind = 'alloc' AND shared_s = 'true', false) AS shared, src_request
FROM (
    SELECT e.shard, s.sidx, e.seq, e.agent, e.kind, e.request, e.pool, e.layer,
           unnest(e.slots) AS slot, unnest(e.pages) AS page, unnest(e.checksums) AS checksum,
           e.shared_s, e.src_request
    -- the detail's JSON parsed once per event, not once per slot the event lists
    FROM (SELECT shard, seq, agent, kind, request, pool, layer, slots, pages, checksums,
                 CASE WHEN detail IS NOT NULL THEN json_extract_string(detail, '$.shared') END AS shared_s,
                 CASE WHEN detail IS NOT NULL THEN json_extract_string(detail, '$.src_request') END AS src_request
          FROM events WHERE kind IN ('alloc', 'free', 'write', 'read')) e
    JOIN shards s USING (shard)
);
