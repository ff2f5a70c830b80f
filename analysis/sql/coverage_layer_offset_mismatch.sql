-- coverage: layer_offset_mismatch
-- items: transfers
-- left_out: neither agent of such a transfer records allocations (no allocator hooks on either side,
--   while other agents have them), so which slots its request held there, and which pages
--   they are, is unknown
-- requires: xfer_hooks
-- One row: compared (the transfers with an agent that records allocations: their
-- descriptors' (pool, layer, page)s are compared with the request's pages) and left_out
-- (transfers between two agents that record no alloc at all). A transfer with only one such
-- agent is not left out here: the model already notes its end there as unknown
-- (queries/unheld_descs.sql), as it does allocations recorded in another process
-- (allocs_elsewhere). By agent, not by pool: an agent that allocates its KV pools but not a
-- metadata pool has its hooks (the checks leave unmanaged pools alone).
SELECT count(*) FILTER (WHERE s_allocs OR d_allocs) AS compared,
       count(*) FILTER (WHERE NOT s_allocs AND NOT d_allocs) AS left_out
FROM xfer_hooks
