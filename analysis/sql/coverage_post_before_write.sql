-- coverage: post_before_write
-- items: transfers out of an agent
-- left_out: the agent sending them records no writes at all (no write hook there, e.g. a
--   tensor-parallel rank whose forward pass is not hooked), or neither of their agents
--   records allocations (no allocator hooks), so whether their sources were written before
--   the post is unknown
-- unmapped: the agent they come from describes no layout for where they read (its layouts not
--   recorded or lost, or a pool or layer its hook leaves out), so which of its slots they read is unknown
-- requires: xfer_hooks
-- One row: compared (transfers to another agent whose sender records writes and
-- allocations) and left_out (those whose sender records no writes while others do, or
-- between two agents that record no alloc). By agent, not by pool: a sender that writes its
-- KV pools but not a metadata pool has its hook (the check leaves such pools alone). A sender
-- that also receives transfers is neither: it may send what it received (a cache sent back),
-- which no write fills; nor is a copy within one agent, nor a transfer from an agent without
-- allocations to one with them (the model notes it as unknown: queries/unheld_descs.sql).
-- Also left out, and counted in unmapped: transfers whose ends on a side the check reads
-- no layout maps (that agent records none, or an end falls outside all of its regions while
-- the other end falls in one: xfer_hooks.s_unmapped / d_unmapped).
SELECT count(*) FILTER (WHERE s_writes AND s_allocs AND NOT blind) AS compared,
       count(*) FILTER (WHERE NOT s_receives AND (NOT s_writes OR (NOT s_allocs AND NOT d_allocs) OR blind)) AS left_out,
       count(*) FILTER (WHERE NOT s_receives AND blind) AS unmapped
FROM (SELECT *, NOT s_layouts OR s_unmapped AS blind FROM xfer_hooks WHERE NOT local)
