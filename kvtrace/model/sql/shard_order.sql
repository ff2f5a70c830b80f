-- shard_order: which shard's events the trace can order before which other's: one row
-- (from, to) when at least one send → receive edge from shard `from` to shard `to` is
-- recorded. Without any (typically: decode tells prefill its destination pages over the
-- engine's own socket, which was not recorded), nothing of `from` is known to
-- happen-before anything of `to`, so "X of `from` did not happen before Y of `to`" is
-- unknown, not a fact.
-- requires: sync_pairs
-- Columns: from_sidx INTEGER, to_sidx INTEGER
CREATE OR REPLACE TABLE shard_order AS
SELECT DISTINCT send_sidx AS from_sidx, recv_sidx AS to_sidx FROM sync_pairs WHERE send_sidx <> recv_sidx;
