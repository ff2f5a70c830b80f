-- holdings: one row per alloc — a request holding a slot from alloc to its free.
-- requires: slot_life_ids, id_names
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
-- From slot_life_ids (slot_life's rows with integer ids): the shard and agent are named once per
-- alloc here, where they are stored, not per alloc/free row through the slot_life view.
CREATE OR REPLACE TABLE holdings AS
WITH a AS (SELECT * FROM slot_life_ids WHERE alloc   -- free_seq: slot_life's, from its sort by hk
), rel AS (
    SELECT sk, seq AS release_seq FROM slot_life_ids WHERE NOT alloc AND cnt_after <= 0
), gen AS (
    -- a shared alloc (prefix-cache hit) of a slot nobody holds re-references the content the
    -- cache kept: it continues the slot's generation, unless it is the slot's first alloc
    SELECT sk, seq AS gen_seq FROM (
        SELECT sk, seq, shared, row_number() OVER (PARTITION BY sk ORDER BY seq) AS k
        FROM slot_life_ids WHERE alloc AND cnt_after = 1)
    WHERE NOT coalesce(shared, false) OR k = 1
), h AS (
    SELECT a.sidx, a.aid, a.pool, a.slot, a.request, a.sk, a.hk, a.seq AS alloc_seq, a.page, a.shared,
           a.free_seq, rel.release_seq
    FROM a ASOF LEFT JOIN rel ON a.sk = rel.sk AND a.seq <= rel.release_seq
)
SELECT n.shards[h.sidx + 1] AS shard, h.sidx, n.agents[h.aid] AS agent, h.pool, h.slot, h.request, h.sk, h.hk,
       h.alloc_seq, h.page, h.shared, h.free_seq, h.release_seq, gen.gen_seq
FROM h ASOF LEFT JOIN gen ON h.sk = gen.sk AND h.alloc_seq >= gen.gen_seq, id_names n;
