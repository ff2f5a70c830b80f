-- coverage: owner_overwrites_delivered
-- items: transfers into another agent
-- left_out: the agent they go into records no writes of its own at all (no write hook on
--   the consumer: e.g. the engine integrations record decode's reads, not the KV its own
--   forward pass writes), so whether it overwrote what they delivered before reading it is
--   unknown
-- unmapped: the agent they go into describes no layout for where they land (its layouts not
--   recorded or lost, or a pool or layer its hook leaves out), so which of its slots they fill is unknown
-- requires: xfer_hooks
-- One row: compared (transfers into an agent that records writes: its own writes are
-- compared with what the transfers delivered) and left_out (transfers into an agent that
-- records none). By agent, not per pool or request: a consumer that writes one pool (a
-- recurrent state) and not another has its hook. A copy within one agent is neither.
-- Also left out, and counted in unmapped: transfers whose ends on a side the check reads
-- no layout maps (that agent records none, or an end falls outside all of its regions while
-- the other end falls in one: xfer_hooks.s_unmapped / d_unmapped).
SELECT count(*) FILTER (WHERE d_writes AND NOT blind) AS compared,
       count(*) FILTER (WHERE NOT d_writes OR blind) AS left_out,
       count(*) FILTER (WHERE d_writes AND blind) AS unmapped
FROM (SELECT *, NOT d_layouts OR d_unmapped AS blind FROM xfer_hooks WHERE NOT local)
