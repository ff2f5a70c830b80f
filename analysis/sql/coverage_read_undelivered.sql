-- coverage: read_undelivered
-- items: agents receiving transfers
-- left_out: they record no reads at all (no read hook there, e.g. a tensor-parallel rank
--   or process whose integration cannot see the model's reads) or no allocations (no
--   allocator hooks, so which pages a read's request held is unknown), so whether they read
--   pages no transfer delivered is unknown
-- requires: xfer_hooks
-- One row: compared (agents that receive transfers from another agent and record reads and
-- allocations) and left_out (those recording no reads or no allocations while others do).
-- By agent: the check's items are reads, and an agent without the hook has none to count.
-- An agent that also sends transfers is neither (it may only forward what it received), nor
-- is a copy within one agent.
SELECT count(*) FILTER (WHERE d_reads AND d_allocs) AS compared,
       count(*) FILTER (WHERE NOT d_sends AND (NOT d_reads OR NOT d_allocs)) AS left_out
FROM (SELECT DISTINCT d_agent, d_reads, d_allocs, d_sends FROM xfer_hooks WHERE NOT local)
