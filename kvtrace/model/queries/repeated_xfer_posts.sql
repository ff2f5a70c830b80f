-- repeated_xfer_posts: per shard whose transfer ids are not one per posting, the first post of
-- the earliest id posted more than once. The format gives every posting a new id (a re-post
-- of a handle is a new transfer); a writer that reuses one (a handle's address, freed and
-- reused by a later handle) leaves which descriptor rows and which completions belong to
-- which posting unknown: read as one transfer, two requests' descriptors are one request's
-- (a false layer_offset_mismatch). The analysis ends the shard before that id's first post.
-- Columns: shard VARCHAR, seq BIGINT
SELECT shard, min(seq) AS seq
FROM (SELECT shard, xfer, min(seq) AS seq FROM events
      WHERE kind = 'xfer_post' AND xfer IS NOT NULL GROUP BY shard, xfer HAVING count(*) > 1)
GROUP BY shard;
