-- desc_bytes_short: the shards whose descriptor rows may not be the ones posted although
-- nothing recorded says rows were lost (a stream damaged or edited after the recorder closed
-- it: the validator reports it, and the analysis must not read the absence of those rows as
-- "not sent", nor a row stored twice as a second descriptor). A cheap pass over totals, per
-- shard: the posts' bytes (xfer_post.nbytes, the sum of each post's descriptor bytes; a
-- re-post writes its rows again) against its descriptor rows' bytes — fewer: rows missing;
-- more: rows repeated, or written before a post the trace does not hold (a live or cut
-- shard's tail: cut_incomplete_descs then finds no post to cut at) —, posts without a size,
-- and descriptors indexing a prepared list the shard did not record.
-- cut_incomplete_descs then finds the first such post of each shard named here.
-- Columns: shard VARCHAR
WITH p AS (
    SELECT shard, sum(nbytes) AS nb, count(*) - count(nbytes) AS unsized
    FROM events WHERE kind = 'xfer_post' GROUP BY shard
), g AS (   -- one pass over the descriptors: their bytes, and the lists they index (few)
    SELECT shard, src_dlist, dst_dlist, sum(nbytes) AS nb FROM descs GROUP BY ALL
), d AS (SELECT shard, sum(nb) AS nb FROM g GROUP BY shard),
refs AS (
    SELECT DISTINCT shard, l AS dlist
    FROM (SELECT shard, src_dlist AS l FROM g UNION ALL SELECT shard, dst_dlist FROM g)
    WHERE l IS NOT NULL
)
SELECT p.shard FROM p LEFT JOIN d USING (shard)
WHERE p.unsized > 0 OR coalesce(d.nb, 0) <> coalesce(p.nb, 0)
UNION
SELECT shard FROM refs ANTI JOIN (SELECT DISTINCT shard, dlist FROM dlists) l USING (shard, dlist)
