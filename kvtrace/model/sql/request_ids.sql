-- request_ids: every request a transfer names (xfers.request), with a small integer id: the
-- narrow tables that store a transfer's request per descriptor (desc_hold_ids, desc_match_ids)
-- store this id instead of the name, and the views that read them (end_hold, desc_match) give
-- the name back (id_names.requests). A name column costs ~0.35 cpu-s to write per 6.8M rows
-- (10M events: the Parquet writer handles every string), an integer ~0.05; the ids are
-- assigned here over the transfers (213K at 10M), never per descriptor.
-- Only the transfers' requests: a request no transfer names has no id here.
-- requires: xfers
-- Columns: request VARCHAR, rid INTEGER (1-based, in name order)
CREATE OR REPLACE TABLE request_ids AS
SELECT request, row_number() OVER (ORDER BY request)::INTEGER AS rid
FROM (SELECT DISTINCT request FROM xfers WHERE request IS NOT NULL);
