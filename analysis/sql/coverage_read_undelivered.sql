-- coverage: read_undelivered
-- items: agents receiving transfers
-- left_out: they record no reads at all (no read hook there, e.g. a tensor-parallel rank
--   or process whose integration cannot see the model's reads) or no allocations (no
--   allocator hooks, so which pages a read's request held is unknown), so whether they read
--   pages no transfer delivered is unknown
-- unmapped: the agent receiving them describes no layout for where transfers land (its layouts not
--   recorded or lost, or a pool or layer its hook leaves out), so what its reads there should hold is unknown
-- requires: xfer_hooks
-- One row: compared (agents that receive transfers from another agent and record reads and
-- allocations) and left_out (those recording no reads or no allocations while others do).
-- By agent: the check's items are reads, and an agent without the hook has none to count.
-- An agent that also sends transfers is neither (it may only forward what it received), nor
-- is a copy within one agent.
-- Also left out, and counted in unmapped: agents that record no layouts, or that some
-- transfer lands in outside all of their regions while its source falls in one of the
-- sender's (xfer_hooks.d_unmapped): the check does not judge their reads there.
SELECT count(*) FILTER (WHERE d_reads AND d_allocs AND NOT blind) AS compared,
       count(*) FILTER (WHERE NOT d_sends AND (NOT d_reads OR NOT d_allocs OR blind)) AS left_out,
       count(*) FILTER (WHERE NOT d_sends AND blind) AS unmapped
FROM (SELECT d_agent, any_value(d_reads) AS d_reads, any_value(d_allocs) AS d_allocs, any_value(d_sends) AS d_sends,
             NOT any_value(d_layouts) OR bool_or(d_unmapped) AS blind   -- its reads there are not judged
      FROM xfer_hooks WHERE NOT local GROUP BY d_agent)
