-- cut_lost_descs: the first transfer post of shard $1 whose descriptor rows, or a
-- prepared list they index, are not in the trace, after the last post that has them.
-- The writer flushes descriptors and lists before the events that use them, so only a
-- trailing run of posts of a shard cut short can lack them.
-- Columns: seq BIGINT  -- that post (null: none)
WITH p AS (
    SELECT e.seq, EXISTS (SELECT 1 FROM descs d WHERE d.shard = e.shard AND d.xfer = e.xfer) AS has
    FROM events e WHERE e.shard = $1 AND e.kind = 'xfer_post'
), lists AS (SELECT DISTINCT dlist FROM dlists WHERE shard = $1),
nolist AS (  -- posts indexing a prepared list that was not recorded
    SELECT min(e.seq) AS seq FROM events e JOIN descs d ON d.shard = e.shard AND d.xfer = e.xfer
    WHERE e.shard = $1 AND e.kind = 'xfer_post'
      AND ((d.src_dlist IS NOT NULL AND d.src_dlist NOT IN (SELECT dlist FROM lists))
        OR (d.dst_dlist IS NOT NULL AND d.dst_dlist NOT IN (SELECT dlist FROM lists)))
)
SELECT least((SELECT min(seq) FROM p WHERE NOT has AND seq > coalesce((SELECT max(seq) FROM p WHERE has), -1)),
             (SELECT seq FROM nolist)) AS seq;
