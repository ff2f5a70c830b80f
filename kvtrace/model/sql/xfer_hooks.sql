-- xfer_hooks: every transfer between two agents, with which kinds of facts each of its two
-- agents records anywhere in the trace (its hooks). The coverage files of the checks
-- (analysis/sql/coverage_*.sql) count from it the transfers a check could not examine
-- because an agent records no event of a kind at all (e.g. a decode rank with no read
-- hook): by agent, never per request or pool, so an agent that has the hook but legally
-- skips some requests (aborted, never read) is never counted.
-- requires: events, xfers, lay, desc_match_ids
-- One row per posted transfer with descriptors; ~200k rows at 10M events, so each coverage
-- count costs next to nothing (the events are read once here, grouped by agent and kind;
-- counting from the descriptors instead cost ~0.2 s per check, 2.9 s in all at 10M).
-- Columns:
--   sidx INTEGER, xfer BIGINT      -- the transfer (xfers)
--   local BOOLEAN                  -- a copy within one agent (no other agent to judge)
--   request VARCHAR                -- its request (null: the post carries none)
--   s_agent, d_agent VARCHAR       -- source and destination agents (WRITE: the initiator's
--                                     memory is the source; READ: the peer's)
--   s_reads, s_writes, s_allocs, s_layouts, s_registers BOOLEAN  -- the source agent records
--                                     read / write / alloc events, layouts, register events
--   s_receives BOOLEAN             -- it is the destination of some transfer between two agents
--                                     (it may send on what it received, which no write fills)
--   d_reads, d_writes, d_allocs, d_layouts, d_registers BOOLEAN  -- the same of the destination
--   d_sends BOOLEAN                -- it is the source of some transfer between two agents
--                                     (it may only forward what it receives, never read it)
--   s_unmapped BOOLEAN             -- some descriptor's source end falls in no layout region of
--                                     its agent while its destination end falls in one: the source
--                                     agent describes memory the transfer reads from only in part
--                                     (a layouts file lost, a pool or layer its hook leaves out, or
--                                     an address out of bounds), so which slots it reads there is unknown
--   d_unmapped BOOLEAN             -- the same of the destination end (which slots it writes)
-- (An end in no layout while the other end is in none either is not counted: memory neither
-- side describes, a metadata buffer, holds no slots on either side.)
CREATE OR REPLACE TABLE xfer_hooks AS
WITH k AS (   -- per agent: the kinds of events it records
    SELECT agent, bool_or(kind = 'read') AS reads, bool_or(kind = 'write') AS writes,
           bool_or(kind = 'alloc') AS allocs, bool_or(kind = 'register' AND addr IS NOT NULL) AS registers
    FROM events WHERE kind IN ('read', 'write', 'alloc', 'register') GROUP BY agent
), x AS (
    SELECT sidx, xfer, request,
           CASE WHEN op = 'READ' THEN peer ELSE agent END AS s_agent,
           CASE WHEN op = 'READ' THEN agent ELSE peer END AS d_agent
    FROM xfers WHERE ndesc > 0
), m AS (   -- per transfer: descriptors one of whose ends no layout region covers
    SELECT psidx AS sidx, xfer, bool_or(s_pid IS NULL AND d_pid IS NOT NULL) AS s_unmapped,
           bool_or(d_pid IS NULL AND s_pid IS NOT NULL) AS d_unmapped
    FROM desc_match_ids GROUP BY ALL
), a AS (   -- per agent: does it send or receive between two agents
    SELECT agent, bool_or(s) AS sends, bool_or(NOT s) AS receives
    FROM (SELECT s_agent AS agent, true AS s FROM x WHERE s_agent IS DISTINCT FROM d_agent
          UNION ALL SELECT d_agent, false FROM x WHERE s_agent IS DISTINCT FROM d_agent)
    GROUP BY agent
)
SELECT x.sidx, x.xfer, x.s_agent IS NOT DISTINCT FROM x.d_agent AS local, x.request, x.s_agent, x.d_agent,
       coalesce(sk.reads, false) AS s_reads, coalesce(sk.writes, false) AS s_writes,
       coalesce(sk.allocs, false) AS s_allocs, x.s_agent IN (SELECT agent FROM lay) AS s_layouts,
       coalesce(sk.registers, false) AS s_registers, coalesce(sa.receives, false) AS s_receives,
       coalesce(dk.reads, false) AS d_reads, coalesce(dk.writes, false) AS d_writes,
       coalesce(dk.allocs, false) AS d_allocs, x.d_agent IN (SELECT agent FROM lay) AS d_layouts,
       coalesce(dk.registers, false) AS d_registers, coalesce(da.sends, false) AS d_sends,
       coalesce(m.s_unmapped, false) AS s_unmapped, coalesce(m.d_unmapped, false) AS d_unmapped
FROM x LEFT JOIN m USING (sidx, xfer)
LEFT JOIN k sk ON sk.agent = x.s_agent LEFT JOIN k dk ON dk.agent = x.d_agent
LEFT JOIN a sa ON sa.agent = x.s_agent LEFT JOIN a da ON da.agent = x.d_agent;
