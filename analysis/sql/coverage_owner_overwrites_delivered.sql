-- coverage: owner_overwrites_delivered
-- items: transfers into another agent
-- left_out: the agent they go into records no writes of its own at all (no write hook on
--   the consumer: e.g. the engine integrations record decode's reads, not the KV its own
--   forward pass writes), so whether it overwrote what they delivered before reading it is
--   unknown
-- requires: xfer_hooks
-- One row: compared (transfers into an agent that records writes: its own writes are
-- compared with what the transfers delivered) and left_out (transfers into an agent that
-- records none). By agent, not per pool or request: a consumer that writes one pool (a
-- recurrent state) and not another has its hook. A copy within one agent is neither.
SELECT count(*) FILTER (WHERE d_writes) AS compared,
       count(*) FILTER (WHERE NOT d_writes) AS left_out
FROM xfer_hooks WHERE NOT local
