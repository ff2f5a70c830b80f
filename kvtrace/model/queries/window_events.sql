-- window_events (ring windows whose kept state was dropped, model/window.py), the view events:
-- the recorded events up to each shard's cut (as cut_events), less what depends on facts
-- before a start-cut shard's window: the allocs, frees and reads of unsure requests
-- (window_unsure) on every shard, and those without a request on a start-cut shard; a
-- start-cut shard's register/deregister events (with some missing, the checks take its
-- agents' layouts as their registered memory instead). Writes stay (every write inside a
-- window is a fact of what a slot holds from then on, whoever made it), but one before a
-- start-cut shard's from_seq loses its checksums: a later write may be missing, so no
-- prediction is made from it (a write with null checksums predicts nothing, docs/format.md).
CREATE OR REPLACE VIEW events AS
SELECT e.* REPLACE (CASE WHEN e.kind = 'write' AND e.seq < s.from_seq THEN NULL ELSE e.checksums END AS checksums)
FROM recorded_events e JOIN shard_cut c ON c.shard = e.shard
LEFT JOIN start_cut s ON s.shard = e.shard
WHERE (c.cut IS NULL OR e.seq <= c.cut)
  AND NOT (e.kind IN ('alloc', 'free', 'read')
           AND (coalesce(e.request IN (SELECT request FROM window_unsure), false)
                OR (e.request IS NULL AND s.shard IS NOT NULL)))
  AND NOT (e.kind IN ('register', 'deregister') AND s.shard IS NOT NULL);
