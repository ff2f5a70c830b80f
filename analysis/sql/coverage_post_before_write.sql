-- coverage: post_before_write
-- items: transfers out of an agent
-- left_out: the agent sending them records no writes at all (no write hook there, e.g. a
--   tensor-parallel rank whose forward pass is not hooked), or neither of their agents
--   records allocations (no allocator hooks), so whether their sources were written before
--   the post is unknown
-- requires: xfer_hooks
-- One row: compared (transfers to another agent whose sender records writes and
-- allocations) and left_out (those whose sender records no writes while others do, or
-- between two agents that record no alloc). By agent, not by pool: a sender that writes its
-- KV pools but not a metadata pool has its hook (the check leaves such pools alone). A sender
-- that also receives transfers is neither: it may send what it received (a cache sent back),
-- which no write fills; nor is a copy within one agent, nor a transfer from an agent without
-- allocations to one with them (the model notes it as unknown: queries/unheld_descs.sql).
SELECT count(*) FILTER (WHERE s_writes AND s_allocs) AS compared,
       count(*) FILTER (WHERE NOT s_receives AND (NOT s_writes OR (NOT s_allocs AND NOT d_allocs))) AS left_out
FROM xfer_hooks WHERE NOT local
