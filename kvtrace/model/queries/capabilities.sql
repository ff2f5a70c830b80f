-- capabilities: what the trace's raw facts allow, one row (see Model.capabilities).
-- Columns: descs, layouts, slots, writes, reads, checksums BOOLEAN
SELECT
    (SELECT count(*) > 0 FROM (SELECT 1 FROM descs LIMIT 1)) AS descs,
    (SELECT count(*) > 0 FROM (SELECT 1 FROM layouts LIMIT 1)) AS layouts,
    (SELECT count(*) > 0 FROM (SELECT 1 FROM events WHERE kind = 'alloc' LIMIT 1)) AS slots,
    (SELECT count(*) > 0 FROM (SELECT 1 FROM events WHERE kind = 'write' LIMIT 1)) AS writes,
    (SELECT count(*) > 0 FROM (SELECT 1 FROM events WHERE kind = 'read' LIMIT 1)) AS reads,
    (SELECT count(*) > 0 FROM (SELECT 1 FROM events WHERE kind IN ('read', 'write')
                               AND checksums IS NOT NULL AND len(checksums) > 0 LIMIT 1)) AS checksums
