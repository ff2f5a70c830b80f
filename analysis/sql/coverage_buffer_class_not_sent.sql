-- coverage: buffer_class_not_sent
-- items: requests sent from one agent to another
-- left_out: the agent receiving them records no reads at all (no read hook there, e.g. a
--   tensor-parallel rank or process whose integration cannot see the model's reads) or no
--   allocations (no allocator hooks), so which pools it read for them is unknown
-- requires: xfer_hooks
-- One row: compared ((sender, receiver, request)s whose receiver records reads and
-- allocations: the pools it reads of its own pages are compared with those the transfers
-- carry) and left_out (those whose receiver records no reads or no allocations while others
-- do). A receiver that also sends transfers is neither (it may only forward what it
-- received), nor is a copy within one agent.
SELECT count(*) FILTER (WHERE d_reads AND d_allocs) AS compared,
       count(*) FILTER (WHERE NOT d_sends AND (NOT d_reads OR NOT d_allocs)) AS left_out
FROM (SELECT DISTINCT s_agent, d_agent, request, d_reads, d_allocs, d_sends
      FROM xfer_hooks WHERE NOT local AND request IS NOT NULL)
