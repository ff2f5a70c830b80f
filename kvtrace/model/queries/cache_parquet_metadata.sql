-- cache_parquet_metadata: keep Parquet footers in memory. The timeline file has ~1,200 row
-- groups at 10M events; parsing their metadata on every query would cost ~60 ms.
SET parquet_metadata_cache = true
