-- holdings: one row per alloc — a request holding a slot from alloc to its free.
-- requires: slot_life
-- Columns:
--   shard VARCHAR, sidx INTEGER, agent VARCHAR, pool VARCHAR, slot BIGINT, request VARCHAR
--   sk, hk UBIGINT      -- join keys (see slot_ev)
--   alloc_seq BIGINT    -- the alloc
--   page BIGINT         -- page ordinal the slot holds for the request
--   shared BOOLEAN      -- a prefix-cache reference
--   free_seq BIGINT     -- the request's next free of the slot (null: never freed)
--   release_seq BIGINT  -- first free at/after the alloc that returns the slot to the
--                          allocator (no holder left); null: never released
--   gen_seq BIGINT      -- the alloc that started the slot's current generation (count 0→1,
--                          not a shared alloc: a prefix-cache hit keeps the content)
CREATE OR REPLACE TABLE holdings AS
WITH a AS (SELECT * FROM slot_life WHERE kind = 'alloc'   -- free_seq: slot_life's, from its sort by hk
), rel AS (
    SELECT sk, seq AS release_seq FROM slot_life WHERE kind = 'free' AND cnt_after <= 0
), gen AS (
    -- a shared alloc (prefix-cache hit) of a slot nobody holds re-references the content the
    -- cache kept: it continues the slot's generation, unless it is the slot's first alloc
    SELECT sk, seq AS gen_seq FROM (
        SELECT sk, seq, shared, row_number() OVER (PARTITION BY sk ORDER BY seq) AS k
        FROM slot_life WHERE kind = 'alloc' AND cnt_after = 1)
    WHERE NOT coalesce(shared, false) OR k = 1
), h AS (
    SELECT a.shard, a.sidx, a.agent, a.pool, a.slot, a.request, a.sk, a.hk, a.seq AS alloc_seq, a.page, a.shared,
           a.free_seq, rel.release_seq
    FROM a ASOF LEFT JOIN rel ON a.sk = rel.sk AND a.seq <= rel.release_seq
)
SELECT h.*, gen.gen_seq
FROM h ASOF LEFT JOIN gen ON h.sk = gen.sk AND h.alloc_seq >= gen.gen_seq;
