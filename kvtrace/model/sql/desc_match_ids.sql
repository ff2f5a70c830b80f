-- desc_match_ids: every descriptor with both ends side by side, and whether it copies the same
-- (pool, layer, page) of its request from source to destination — the one rule of
-- descriptor correctness, read by the layer_offset_mismatch check and the TUI inspector.
-- The rule applies (checked) when both ends fall in a layout and one side's pool is
-- allocator-managed. Then the ends must agree on pool, layer and K/V part, the request
-- must hold both slots at the post (pages from desc_hold_ids), and the bytes must be the same
-- tokens: with the same bytes per token on both sides (same geometry, or pages of other
-- sizes) the same token position page * slot_bytes + offset; with heads split differently
-- (heterogeneous TP: where a rank's share sits in the slot is the engine's choice)
-- overlapping token ranges of the two pages. A descriptor that agrees but whose
-- destination bytes another descriptor of the same transfer also covers is a duplicate.
-- An end on an agent that recorded no holding at all for the request (its allocator is not
-- hooked there, e.g. a scheduler in a process of its own) proves nothing about which slots
-- the request holds: such a descriptor is unknown (not checked), never "not held".
-- requires: desc_hold_ids, lay, holding_list, agent_home, agent_ids, xfers
-- pieces: xfers.xfer by desc_hold_ids / 2
-- Built from the descriptors of the transfers with $lo <= xfer < $hi (null: unbounded;
-- TraceModel builds it in one piece unless desc_hold_ids, with about half its columns read
-- here (the "/ 2"), outgrows a share of the memory cap, then in ranges of transfers): a
-- descriptor and every group of the duplicate test belong to one transfer, so the pieces are
-- exact, and each reads only its own descriptors (desc_hold_ids' row groups outside the range
-- are skipped). (Until the ends were stored side by side this joined the 6.8M destination
-- ends to their 6.8M source ends at 10M events, ~2.5 of its ~10 cpu-s; under a 300 MB cap in
-- 27 pieces, 14-16 cpu-s, in one statement 27.)
-- Stored narrow, as desc_hold_ids (whose integer ids it reads: its hash tables carry no
-- names); the view desc_match gives the names back (id_names). Columns: desc_match's,
-- with psidx (the initiator shard) for shard, s_aid, s_pid, s_part_id / d_aid, d_pid, d_part_id
-- for the ends' agent, pool and part, unheld_aid for unheld.
CREATE OR REPLACE TABLE desc_match_ids AS
-- page tokens per layer region, not per pool: a pool's layers may differ (vLLM's hybrid
-- layer groups with their own page size, per-layer head counts); with one value per pool
-- page 1 of 16 tokens was compared with page 1 of 32 (a false stray descriptor)
WITH pt AS (SELECT i.aid, l.pid, l.layer, coalesce(l.part_id, 0) AS part_k, coalesce(any_value(l.page_tokens), 1) AS pt
            FROM lay l JOIN agent_ids i USING (agent) GROUP BY ALL),
-- agents with holding facts per request, recorded where the agent lives (holdings another
-- process records for it cannot be ordered with its transfers: see managed)
ah AS (SELECT DISTINCT i.aid, h.request FROM holding_list h JOIN agent_home o ON o.agent = h.agent AND o.h_shard = h.shard
       JOIN agent_ids i ON i.agent = h.agent
       WHERE ($lo IS NULL AND $hi IS NULL)
          OR h.request IN (SELECT request FROM xfers WHERE ($lo IS NULL OR xfer >= $lo) AND ($hi IS NULL OR xfer < $hi))),
a AS (
    SELECT t.psidx, t.xfer, t.pos, t.request, t.post_seq, t.nbytes,
           t.s_aid, t.s_addr, t.s_pid, t.s_layer, t.s_part_id, t.s_slot, t.s_off, t.s_slot_bytes, t.s_page,
           t.s_managed, t.s_dlist, t.s_idx, t.s_alloc_seq,
           t.d_aid, t.d_addr, t.d_pid, t.d_layer, t.d_part_id, t.d_slot, t.d_off, t.d_slot_bytes, t.d_page,
           t.d_managed, t.d_dlist, t.d_idx, t.d_alloc_seq,
           -- a page that cannot be known (its holding unordered with the post, past a cut, or
           -- of a transfer with no request) proves nothing, unless the other end is proven
           -- outside the request's pages
           coalesce(t.d_pid IS NOT NULL AND t.s_pid IS NOT NULL AND (t.d_managed OR t.s_managed)
                    AND (NOT (t.d_h_unknown OR t.s_h_unknown)
                         OR (t.s_managed AND t.s_alloc_seq IS NULL AND NOT t.s_h_unknown)
                         OR (t.d_managed AND t.d_alloc_seq IS NULL AND NOT t.d_h_unknown)), false) AS applies,
           -- an end not held whose agent holds nothing of the request: not held is unprovable
           CASE WHEN t.s_alloc_seq IS NULL AND sh.aid IS NULL THEN t.s_aid
                WHEN t.d_alloc_seq IS NULL AND th.aid IS NULL THEN t.d_aid END AS blank,
           t.s_slot_bytes * tp.pt = t.d_slot_bytes * sp.pt AS same_geometry,
           -- a slot held by an alloc that recorded no page ordinal (the format allows it) is the
           -- request's, its tokens unknown: pool, layer and part are still compared, pages not
           coalesce(t.s_pid = t.d_pid AND t.s_layer = t.d_layer AND t.s_part_id IS NOT DISTINCT FROM t.d_part_id AND
               CASE WHEN t.s_alloc_seq IS NULL OR t.d_alloc_seq IS NULL THEN false
                    WHEN t.s_page IS NULL OR t.d_page IS NULL THEN true
                    WHEN t.s_slot_bytes * tp.pt = t.d_slot_bytes * sp.pt
                    THEN t.s_page * t.s_slot_bytes + t.s_off = t.d_page * t.d_slot_bytes + t.d_off
                    ELSE t.s_page * sp.pt < (t.d_page + 1) * tp.pt AND t.d_page * tp.pt < (t.s_page + 1) * sp.pt END,
               false) AS same
    -- the two ends of a descriptor, side by side in one row of desc_hold_ids (no join pairs them);
    -- "holds something of the request" as plain left joins (ah is distinct): as NOT EXISTS
    -- subqueries DuckDB built a correlated plan over every row (~1/3 of the cost at 10M);
    -- looked up only for an end not held (a null key never matches; blank reads it only then)
    FROM desc_hold_ids t
    LEFT JOIN pt sp ON sp.aid = t.s_aid AND sp.pid = t.s_pid AND sp.layer = t.s_layer AND sp.part_k = coalesce(t.s_part_id, 0)
    LEFT JOIN pt tp ON tp.aid = t.d_aid AND tp.pid = t.d_pid AND tp.layer = t.d_layer AND tp.part_k = coalesce(t.d_part_id, 0)
    LEFT JOIN ah sh ON sh.aid = t.s_aid AND sh.request = CASE WHEN t.s_alloc_seq IS NULL THEN t.request END
    LEFT JOIN ah th ON th.aid = t.d_aid AND th.request = CASE WHEN t.d_alloc_seq IS NULL THEN t.request END
    WHERE ($lo IS NULL OR t.xfer >= $lo) AND ($hi IS NULL OR t.xfer < $hi)
), b AS (SELECT a.* EXCLUDE (applies, blank), applies AND blank IS NULL AS checked,
                CASE WHEN applies THEN blank END AS unheld_aid FROM a
), ov AS (  -- agents with two layout regions that overlap on other slot boundaries (rare)
    SELECT DISTINCT i.aid FROM lay a JOIN lay o ON o.agent = a.agent AND a.addr < o.addr + o.nbytes
        AND o.addr < a.addr + a.nbytes AND (a.addr <> o.addr OR a.slot_bytes <> o.slot_bytes)
    JOIN agent_ids i ON i.agent = a.agent
), cand AS (
    -- the (transfer, destination agent)s whose agreeing descriptors may overlap: an end lies
    -- in its region, so where an agent's regions do not overlap, two ends that each stay in
    -- one slot overlap only in the same slot (the same slot start address); any other end
    -- (across slots, empty, or on such an agent) sends its whole group to the exact test
    -- below. (One hash aggregate of the agreeing ends instead of sorting them all: ~1.5 of
    -- desc_match's ~11 cpu-s at 10M; the result is the window's on every group.) Grouped by
    -- the group, its cells as a list (a null cell, never safe, sends it anyway): 0.4M small
    -- groups instead of one per cell (6.8M groups of one at 10M): ~-0.4 cpu-s. Grouped by the
    -- group's own columns and its distinct cells counted by list_unique (not by a hash of the
    -- group, then hashed again per end to find them, nor len(list_distinct)): ~-1.3 cpu-s at
    -- 10M (bench/results/checks.txt)
    SELECT psidx, xfer, d_aid FROM (
        SELECT psidx, xfer, d_aid, b.d_addr - b.d_off::UBIGINT AS cell,
               coalesce(b.nbytes >= 1 AND b.d_off::UBIGINT + b.nbytes <= b.d_slot_bytes
                        AND NOT list_contains(o.aids, b.d_aid), false) AS safe
        FROM b, (SELECT coalesce(list(aid), []) AS aids FROM ov) o WHERE checked AND same)
    GROUP BY psidx, xfer, d_aid HAVING NOT bool_and(safe) OR list_unique(list(cell)) < count(*)
), dup AS (  -- destination bytes covered twice by one transfer (among the agreeing descriptors)
    SELECT psidx, xfer, pos FROM (
        SELECT b.psidx, b.xfer, pos, d_addr, nbytes,
               max(d_addr + nbytes) OVER (PARTITION BY psidx, xfer, d_aid ORDER BY d_addr, pos
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end,
               lead(d_addr) OVER (PARTITION BY psidx, xfer, d_aid ORDER BY d_addr, pos) AS next_start
        FROM b SEMI JOIN cand c ON c.psidx = b.psidx AND c.xfer = b.xfer AND c.d_aid IS NOT DISTINCT FROM b.d_aid
        WHERE checked AND same)
    WHERE d_addr < prev_end OR next_start < d_addr + nbytes
)
SELECT b.* EXCLUDE (same, same_geometry, s_alloc_seq, d_alloc_seq), checked AND same AS ok, dup.pos IS NOT NULL AS dup,
       CASE WHEN NOT checked THEN NULL
            WHEN s_pid <> d_pid THEN 'pools differ'
            WHEN s_layer <> d_layer THEN 'layers differ'
            WHEN s_part_id IS DISTINCT FROM d_part_id THEN 'K/V parts differ'
            WHEN s_alloc_seq IS NULL THEN 'source slot not held by the request'
            WHEN d_alloc_seq IS NULL THEN 'destination slot not held by the request'
            WHEN NOT same AND same_geometry THEN format('token positions differ (p{}+{} → p{}+{})', s_page, s_off, d_page, d_off)
            WHEN NOT same THEN format('pages hold different tokens (p{} → p{})', s_page, d_page)
            WHEN dup.pos IS NOT NULL THEN 'destination bytes covered twice by this transfer'
       END AS problem
FROM b LEFT JOIN dup USING (psidx, xfer, pos);
