-- cut_incomplete_descs: the first transfer post of shard $1 whose descriptor rows are not the
-- ones it posted: none at all, other bytes than the post moves (xfer_post.nbytes, the sum of
-- its descriptors' bytes; summed over a transfer id's posts, which are one but for a writer
-- that reuses ids (repeated_xfer_posts cuts there): fewer, rows are missing; more, a row is
-- stored twice), or one indexing a prepared list that was not recorded; or rows whose positions are not the
-- post's list (each of 0..n-1 once per post: a hole or a repeat) where the post has no nbytes,
-- which is all such a writer leaves to judge by (a lost tail of a list then shows nothing).
-- Asked for a shard whose recorder counted descriptor or list rows lost (shard.json
-- lost.rows: a write that failed mid-run loses rows from the middle of the stream), and for
-- one whose totals say rows are missing although none were counted lost (desc_bytes_short).
-- Columns: seq BIGINT  -- that post (null: none)
WITH lists AS (SELECT DISTINCT dlist FROM dlists WHERE shard = $1),
posts AS (
    SELECT xfer, min(seq) AS seq, sum(nbytes) AS nbytes, count(nbytes) = count(*) AS sized, count(*) AS n
    FROM events WHERE shard = $1 AND kind = 'xfer_post' GROUP BY xfer
), rows AS (
    SELECT xfer, sum(nbytes) AS nbytes, count(*) AS n, count(DISTINCT pos) AS npos, min(pos) AS lo, max(pos) AS hi,
           bool_or((src_dlist IS NOT NULL AND src_dlist NOT IN (SELECT dlist FROM lists))
                OR (dst_dlist IS NOT NULL AND dst_dlist NOT IN (SELECT dlist FROM lists))) AS nolist
    FROM descs WHERE shard = $1 GROUP BY xfer
)
SELECT min(p.seq) AS seq
FROM posts p LEFT JOIN rows r USING (xfer)
-- (a post of zero bytes legally has no rows)
WHERE (r.xfer IS NULL AND NOT (p.sized AND p.nbytes = 0)) OR coalesce(r.nolist, false)
   OR (p.sized AND coalesce(r.nbytes <> p.nbytes, false))
   -- (a sized post's bytes already tell a lost or repeated row: its positions are not asked,
   -- so a writer numbering from 1 loses nothing where it records sizes)
   OR (NOT p.sized AND coalesce(r.lo <> 0 OR r.hi <> r.npos - 1 OR r.n <> r.npos * p.n, false));
