-- coverage: layout_mismatch
-- items: transfers between two agents
-- left_out: one of their agents records no layouts at all (no layout hook there, while
--   other agents have one), so how it stores what they copy is unknown
-- requires: xfer_hooks
-- One row: compared (transfers between two agents that both record layouts: the geometry of
-- the classes they copy is compared) and left_out (those with an agent recording none). By
-- agent, not by pool: a pool one side does not describe while it describes others is left
-- as it is (a metadata buffer); a copy within one agent is neither.
SELECT count(*) FILTER (WHERE s_layouts AND d_layouts) AS compared,
       count(*) FILTER (WHERE NOT s_layouts OR NOT d_layouts) AS left_out
FROM xfer_hooks WHERE NOT local
