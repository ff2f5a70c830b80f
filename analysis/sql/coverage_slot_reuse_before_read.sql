-- coverage: slot_reuse_before_read
-- items: transfers into another agent
-- left_out: the agent they go into records no reads at all (no read hook there, e.g. a
--   tensor-parallel rank or process whose integration cannot see the model's reads), or
--   neither of their agents records allocations (no allocator hooks), so whether their slots were freed, reused or overwritten before the read is unknown
-- unmapped: the agent they go into describes no layout for where they land (its layouts not
--   recorded or lost, or a pool or layer its hook leaves out), so which of its slots they fill is unknown
-- requires: xfer_hooks
-- One row: compared (transfers into an agent that records reads and allocations: what
-- happened to their slots before each read is checked) and left_out (transfers into an agent
-- that records no reads while others do, or between two agents that record no alloc). By
-- agent, not per request or pool: a receiver that reads some requests and not others
-- (aborted, never read) has its hook, and its unread transfers are legal. An agent that also
-- sends transfers is neither (it may only forward what it received, like a prefill sent a
-- cache back), nor is a copy within one agent; nor is a transfer into an agent without
-- allocations from one with them (the model notes it as unknown: queries/unheld_descs.sql).
-- Also left out, and counted in unmapped: transfers whose ends on a side the check reads
-- no layout maps (that agent records none, or an end falls outside all of its regions while
-- the other end falls in one: xfer_hooks.s_unmapped / d_unmapped).
SELECT count(*) FILTER (WHERE d_reads AND d_allocs AND NOT blind) AS compared,
       count(*) FILTER (WHERE NOT d_sends AND (NOT d_reads OR (NOT d_allocs AND NOT s_allocs) OR blind)) AS left_out,
       count(*) FILTER (WHERE NOT d_sends AND blind) AS unmapped
FROM (SELECT *, NOT d_layouts OR d_unmapped AS blind FROM xfer_hooks WHERE NOT local)
