-- object_kind: whether a name is a table or a view of the model's database (no row: neither).
-- Parameters: $1 name
-- Columns: kind VARCHAR   -- 'table' | 'view'
SELECT 'table' AS kind FROM duckdb_tables() WHERE table_name = $1 AND schema_name = 'main'
UNION ALL
SELECT 'view' FROM duckdb_views() WHERE view_name = $1 AND schema_name = 'main'
