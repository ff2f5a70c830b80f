-- table_memory: bytes DuckDB holds for table rows (the derived tables; the base tables are
-- views over the Parquet index), compressed or not.
-- Columns: bytes BIGINT
SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT AS bytes FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'
