-- coverage: slot_reuse_before_read
-- items: transfers into another agent
-- left_out: the agent they go into records no reads at all (no read hook there, e.g. a
--   tensor-parallel rank or process whose integration cannot see the model's reads), or
--   neither of their agents records allocations (no allocator hooks), so whether their slots were freed, reused or overwritten before the read is unknown
-- requires: xfer_hooks
-- One row: compared (transfers into an agent that records reads and allocations: what
-- happened to their slots before each read is checked) and left_out (transfers into an agent
-- that records no reads while others do, or between two agents that record no alloc). By
-- agent, not per request or pool: a receiver that reads some requests and not others
-- (aborted, never read) has its hook, and its unread transfers are legal. An agent that also
-- sends transfers is neither (it may only forward what it received, like a prefill sent a
-- cache back), nor is a copy within one agent; nor is a transfer into an agent without
-- allocations from one with them (the model notes it as unknown: queries/unheld_descs.sql).
SELECT count(*) FILTER (WHERE d_reads AND d_allocs) AS compared,
       count(*) FILTER (WHERE NOT d_sends AND (NOT d_reads OR (NOT d_allocs AND NOT s_allocs))) AS left_out
FROM xfer_hooks WHERE NOT local
