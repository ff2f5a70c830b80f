-- table_bytes: a rough size in memory of a table's (or view's) rows: its row count times
-- the mean length of its first rows written out as text (a number or a string takes about
-- as many bytes in a hash table as it has characters; a list, its elements), so a table
-- read from Parquet is measured without reading it all. Sizes the pieces of a derived
-- table built in pieces (TraceModel._piece_count).
-- Parameters: $t the table's name (a derived object's, never input)
-- Columns: bytes DOUBLE
SELECT (SELECT count(*) FROM query_table($t))
       * (SELECT coalesce(avg(strlen(r::VARCHAR)), 0) FROM (SELECT * FROM query_table($t) LIMIT 2048) r) AS bytes
