-- coverage: desc_not_owned
-- items: transfers
-- left_out: neither agent of such a transfer records allocations (no allocator hooks on either side,
--   while other agents have them), so which slots its request held there, is unknown
-- unmapped: an agent of theirs describes no layout for where their bytes are (its layouts not
--   recorded or lost, or a pool or layer its hook leaves out), so which of its slots they touch is unknown
-- requires: xfer_hooks
-- One row: compared (the transfers with an agent that records allocations: the slots their
-- descriptors touch there are checked against the request's holding) and left_out (transfers
-- between two agents that record no alloc at all). A transfer with only one such agent is
-- not left out here: the model already notes its end there as unknown
-- (queries/unheld_descs.sql), as it does allocations recorded in another process
-- (allocs_elsewhere). By agent, not by pool: an agent that allocates its KV pools but not a
-- metadata pool has its hooks (the checks leave unmanaged pools alone).
-- Also left out, and counted in unmapped: transfers whose ends on a side the check reads
-- no layout maps (that agent records none, or an end falls outside all of its regions while
-- the other end falls in one: xfer_hooks.s_unmapped / d_unmapped).
SELECT count(*) FILTER (WHERE (s_allocs OR d_allocs) AND NOT blind) AS compared,
       count(*) FILTER (WHERE (NOT s_allocs AND NOT d_allocs) OR blind) AS left_out,
       count(*) FILTER (WHERE blind) AS unmapped
FROM (SELECT *, (s_allocs AND (NOT s_layouts OR s_unmapped))      -- an end whose slots matter (its agent
             OR (d_allocs AND (NOT d_layouts OR d_unmapped)) AS blind   -- allocates) that no layout maps
      FROM xfer_hooks)
