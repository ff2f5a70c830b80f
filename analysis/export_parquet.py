"""Parquet export: every table of the trace, hive-partitioned by shard.

Layout (readable by DuckDB, polars, Spark and pyarrow without kvtrace)::

    OUT/events/shard=prefill/part-0.parquet
    OUT/descs/shard=decode/part-0.parquet
    ...
    OUT/manifest.json          the trace's manifest, plus the export's own fields

The ``shard`` column lives in the folder name only (hive style); every other column
keeps the trace format's name and type, extras included. A shard with no rows in a table
still gets an (empty) file so each table lists every shard.
"""
from __future__ import annotations

import json
import os
import urllib.parse

from ..tracer.schema import TABLES


def write_parquet(trace, out_dir: str, *, compression: str = "zstd") -> dict:
    """Write ``trace`` (a :class:`kvtrace.tracer.reader.Trace`) under ``out_dir``.

    Returns ``{table: rows written}``.
    """
    import pyarrow.parquet as pq  # only exporters need the Parquet writer

    counts = {}
    for t in TABLES:
        counts[t] = 0
        for s in trace.shards:
            # hive partition values are URL-escaped so odd shard names survive
            d = os.path.join(out_dir, t, "shard=" + urllib.parse.quote(s.name, safe=""))
            os.makedirs(d, exist_ok=True)
            tbl = s.streams[t].table.replace_schema_metadata(None)
            pq.write_table(tbl, os.path.join(d, "part-0.parquet"), compression=compression)
            counts[t] += tbl.num_rows
    man = dict(trace.manifest)
    man["export"] = {"format": "parquet", "partitioning": "hive:shard", "tables": list(TABLES), "rows": counts,
                     "source": os.path.abspath(trace.path)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True, default=str)
    return counts
