-- coverage: desc_out_of_bounds
-- items: transfer ends (the memory a transfer reads or writes on one agent)
-- left_out: their agent recorded neither the regions it registered nor its layouts (e.g.
--   its process was not traced), so where its memory lies is unknown
-- requires: xfer_hooks
-- One row: compared (ends on an agent with register events or layouts: the check places
-- them in its regions) and left_out (ends on an agent with neither, which the check does not
-- judge). Each transfer has two ends; a copy within one agent counts both.
SELECT count(*) FILTER (WHERE s_registers OR s_layouts) + count(*) FILTER (WHERE d_registers OR d_layouts) AS compared,
       count(*) FILTER (WHERE NOT (s_registers OR s_layouts)) + count(*) FILTER (WHERE NOT (d_registers OR d_layouts)) AS left_out
FROM xfer_hooks
