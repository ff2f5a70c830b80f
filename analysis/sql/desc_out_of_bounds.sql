-- check: desc_out_of_bounds
-- severity: error
-- needs: descs
-- summary: a descriptor range lies outside every registered region, or crosses a slot boundary
-- explain: Each descriptor end (agent, [addr, addr+nbytes)) must lie inside one region the
--   agent registered with NIXL (register events; layouts count as registered when an
--   agent has no register events), and, where layouts describe the region, inside one
--   slot. A range no region covers is what sglang #31295 (heterogeneous TP) produced; a
--   range crossing slots mixes two pages. Ends of agents with neither register events nor
--   layouts cannot be judged and are not reported.
-- Columns:
--   severity VARCHAR   -- 'error'
--   agent VARCHAR      -- whose memory the bad end points into
--   request VARCHAR    -- the transfer's request
--   pool VARCHAR, layer INTEGER, slot BIGINT  -- layout position (crossing case), else null
--   slots BIGINT[]     -- affected slots (crossing case)
--   events STRUCT(shard VARCHAR, seq BIGINT)[]  -- first posts carrying such descriptors
--   count BIGINT       -- bad descriptor ends
--   problem VARCHAR    -- 'outside' | 'crosses'
--   side VARCHAR       -- src | dst
--   message VARCHAR
WITH reg AS (
    SELECT agent, addr, nbytes FROM events WHERE kind = 'register' AND addr IS NOT NULL
    UNION ALL
    SELECT agent, addr, nbytes FROM lay WHERE agent NOT IN (SELECT agent FROM events WHERE kind = 'register')
), e AS (
    SELECT e.*, NOT EXISTS (SELECT 1 FROM reg r WHERE r.agent = e.agent AND e.addr >= r.addr
                                                  AND e.addr + e.nbytes <= r.addr + r.nbytes) AS outside
    FROM end_hold e WHERE e.agent IN (SELECT agent FROM reg)
), bad AS (
    SELECT *, CASE WHEN outside THEN 'outside' ELSE 'crosses' END AS problem
    FROM e WHERE outside OR crosses
)
SELECT 'error' AS severity, agent, request, min(pool) AS pool, min(layer) AS layer, min(slot) AS slot,
       list(DISTINCT slot ORDER BY slot) FILTER (WHERE slot IS NOT NULL) AS slots,
       list(DISTINCT ev(shard, post_seq))[1:4] AS events, count(*) AS count, problem, side,
       CASE problem
       WHEN 'outside' THEN format('{} {} descriptor end(s) of request {} point into {} memory that no registered region covers (first at 0x{:x}, {} bytes): NIXL would read or write memory nobody described.',
                                  count(*), side, request, agent, min(addr), arg_min(nbytes, addr))
       ELSE format('{} {} descriptor end(s) of request {} cross a slot boundary in {} pool {} (first at slot {}, offset {}, {} bytes): one descriptor mixes two pages.',
                   count(*), side, request, agent, min(pool), min(slot), arg_min(off, slot), arg_min(nbytes, slot))
       END AS message
FROM bad GROUP BY agent, request, problem, side
ORDER BY min(post_seq);
