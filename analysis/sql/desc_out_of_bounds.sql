-- check: desc_out_of_bounds
-- severity: error
-- needs: descs
-- summary: a descriptor range lies outside every registered region, or crosses a slot boundary
-- explain: Each descriptor end (agent, [addr, addr+nbytes)) must lie inside one region the
--   agent registered with NIXL (register events; layouts count as registered when an
--   agent has no register events), and, where layouts describe the region, inside that
--   layout region and either inside one slot or a whole run of slots (starting at a slot
--   boundary, a multiple of the slot size long: SGLang groups contiguous pages into one
--   descriptor). A range no region covers is what sglang #31295 (heterogeneous TP)
--   produced; a range crossing a slot boundary mid-slot mixes parts of two pages, and one
--   running out of its layout region (into the next layer or pool of one registration)
--   mixes regions. A range in memory its agent deregistered before the post (the
--   deregister happens-before it, no register again since) is reported too. Ends of
--   agents with neither register events nor layouts cannot be judged and are not reported.
--   One finding per agent, request, problem, side and pool (ends running out of their layout
--   region apart from ends crossing a slot inside it).
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- whose memory the bad end points into
--   request VARCHAR    -- the transfer's request
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- layout position (crossing case), else null
--   slots BIGINT[]     -- affected slots of the pool (crossing case)
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts carrying such descriptors
--   count BIGINT       -- bad descriptor ends
--   problem VARCHAR    -- 'outside' | 'crosses' | 'deregistered'
--   side VARCHAR       -- src | dst
--   message VARCHAR
WITH reg AS (
    SELECT agent, addr, nbytes FROM events WHERE kind = 'register' AND addr IS NOT NULL
    UNION ALL
    SELECT agent, addr, nbytes FROM lay WHERE agent NOT IN (SELECT agent FROM events WHERE kind = 'register')
), lr AS (  -- ends that start in a layout region but run past its end (desc_end leaves them unresolved)
    SELECT e.psidx, e.shard, e.xfer, e.pos, e.side, any_value(l.pool) AS l_pool, any_value(l.layer) AS l_layer,
           any_value((e.addr - l.addr) // l.slot_bytes)::BIGINT AS l_slot
    FROM end_hold e JOIN lay l ON e.pool IS NULL AND l.agent = e.agent
         AND e.addr >= l.addr AND e.addr < l.addr + l.nbytes AND e.addr + e.nbytes > l.addr + l.nbytes
    GROUP BY ALL
), dr AS (SELECT shard, seq, agent, addr, nbytes FROM events WHERE kind = 'deregister' AND addr IS NOT NULL),
dead AS (  -- ends in memory its agent deregistered before the post (happens-before), not registered again
    SELECT DISTINCT e.psidx, e.shard, e.xfer, e.pos, e.side
    FROM end_hold e JOIN dr ON dr.agent = e.agent AND dr.shard = e.h_shard AND dr.seq <= e.bound
                  AND e.addr < dr.addr + dr.nbytes AND dr.addr < e.addr + e.nbytes
    WHERE NOT EXISTS (SELECT 1 FROM events g WHERE g.kind = 'register' AND g.agent = e.agent AND g.shard = dr.shard
                      AND g.seq > dr.seq AND g.seq <= e.bound AND g.addr <= e.addr AND g.addr + g.nbytes >= e.addr + e.nbytes)
), rng AS (   -- the distinct ranges descriptors use (far fewer than descriptor ends; by the agent's
               -- integer id first, named after)
    SELECT DISTINCT n.agents[g.aid] AS agent, g.addr, g.nbytes
    FROM (SELECT DISTINCT aid, addr, nbytes FROM end_hold_ids WHERE addr IS NOT NULL AND nbytes IS NOT NULL) g, id_names n
    WHERE n.agents[g.aid] IN (SELECT agent FROM reg)
), out AS (    -- ranges no region of their agent contains
    SELECT * FROM rng g WHERE NOT EXISTS (SELECT 1 FROM reg r WHERE r.agent = g.agent AND g.addr >= r.addr
                                                            AND g.addr + g.nbytes <= r.addr + r.nbytes)
), out_ids AS (SELECT i.aid, o.addr, o.nbytes FROM out o JOIN agent_ids i USING (agent)),
e0 AS (   -- narrow first: which ends are outside every region, and which can be bad at all
          -- (on the ends' integer columns: agents by id)
    SELECT e.psidx, e.xfer, e.pos, CASE WHEN e.dst THEN 'dst' ELSE 'src' END AS side,
           e.addr IS NULL OR e.nbytes IS NULL OR (e.aid, e.addr, e.nbytes) IN (SELECT (aid, addr, nbytes) FROM out_ids) AS outside,
           coalesce(e.crosses AND NOT (e.off = 0 AND e.nbytes % e.slot_bytes = 0), false) AS crossing
    FROM end_hold_ids e WHERE e.aid IN (SELECT aid FROM agent_ids WHERE agent IN (SELECT agent FROM reg))
), e AS (   -- the full rows of those few ends only
    SELECT e.*, c.outside FROM end_hold e
    JOIN (SELECT * FROM e0 WHERE outside OR crossing
             OR (psidx, xfer, pos, side) IN (SELECT (psidx, xfer, pos, side) FROM lr)
             OR (psidx, xfer, pos, side) IN (SELECT (psidx, xfer, pos, side) FROM dead)) c
      USING (psidx, xfer, pos, side)
), bad AS (
    SELECT e.* REPLACE (coalesce(e.pool, lr.l_pool) AS pool, coalesce(e.layer, lr.l_layer) AS layer,
                        coalesce(e.slot, lr.l_slot) AS slot),
           CASE WHEN outside THEN 'outside' WHEN dd.xfer IS NOT NULL THEN 'deregistered' ELSE 'crosses' END AS problem
    FROM e LEFT JOIN lr USING (psidx, shard, xfer, pos, side) LEFT JOIN dead dd USING (psidx, shard, xfer, pos, side)
    WHERE outside
       OR (crosses AND NOT (off = 0 AND nbytes % slot_bytes = 0))   -- a whole run of slots is legal
       OR (lr.l_pool IS NOT NULL AND NOT outside)
       OR dd.xfer IS NOT NULL
)
SELECT 'error' AS severity, agent, request, pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
       list(DISTINCT ev(shard, post_seq) ORDER BY ev(shard, post_seq))[1:4] AS events, count(*) AS count, problem, side,
       CASE WHEN problem = 'outside' THEN format('{} {} descriptor end(s) of request {} point into {} memory that no registered region covers (first at 0x{:x}, {} bytes): NIXL would read or write memory nobody described.',
                                  count(*), side, request, agent, min(addr), arg_min(nbytes, addr))
       WHEN problem = 'deregistered' THEN format('{} {} descriptor end(s) of request {} point into {} memory deregistered before the transfer was posted (first at 0x{:x}, {} bytes): NIXL would touch memory no longer registered.',
                                  count(*), side, request, agent, min(addr), arg_min(nbytes, addr))
       WHEN bool_or(off IS NULL) THEN format('{} {} descriptor end(s) of request {} run past the end of {} pool {} layer {} (first from slot {}, {} bytes) into the next region of the same registration: one descriptor mixes layers or pools.',
                   count(*), side, request, agent, pool, arg_min(layer, slot), min(slot), arg_min(nbytes, slot))
       ELSE format('{} {} descriptor end(s) of request {} cross a slot boundary in {} pool {} (first at slot {}, offset {}, {} bytes): one descriptor mixes two pages.',
                   count(*), side, request, agent, pool, min(slot), arg_min(off, slot), arg_min(nbytes, slot))
       END AS message
-- one finding per pool (its slots are that pool's) and, among crossing ends, apart for those
-- running out of their layout region (off is null) and those crossing a slot inside it
FROM bad GROUP BY agent, request, problem, side, pool, off IS NULL
ORDER BY min(post_seq);
