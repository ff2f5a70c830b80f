-- piece_bounds: where a table built in pieces cuts its key column (Derived.piece_key): the
-- values at the quantiles $q of column $c of table $t, so the pieces hold equal row counts.
-- Parameters: $t the table, $c the column (a derived object's, never input), $q DOUBLE[]
-- Columns: cuts (the column's type)[]
SELECT quantile_disc(t[$c], $q) AS cuts FROM query_table($t) t
