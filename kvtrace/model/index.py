"""The `_index/` cache: every table of every shard compacted to one Parquet file each,
with a leading ``shard`` column, so DuckDB reads the trace out of core.

Built on first open (batch by batch: memory stays bounded), rebuilt when a shard's
stream files change size or mtime. A read-only trace gets its index in a temp folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from ..tracer.reader import Trace, open_trace
from ..tracer.schema import SCHEMAS, TABLES

INDEX_DIR = "_index"
INDEX_VERSION = 1


def _stamp(trace: Trace) -> dict:
    files = {}
    for s in trace.shards:
        for t in TABLES:
            p = os.path.join(s.path, t + ".arrows")
            if os.path.exists(p):
                st = os.stat(p)
                files[f"{s.name}/{t}"] = [st.st_size, st.st_mtime_ns]
    return {"index_version": INDEX_VERSION, "files": files}


def index_dir_for(trace_path: str) -> str:
    d = os.path.join(trace_path, INDEX_DIR)
    if os.access(trace_path, os.W_OK):
        return d
    h = hashlib.sha1(os.path.abspath(trace_path).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"kvtrace-index-{h}")


def ensure_index(trace: Trace | str) -> tuple[Trace, str]:
    """Build (or reuse) the Parquet index of a trace; returns (trace, index folder)."""
    if isinstance(trace, str):
        trace = open_trace(trace)
    d = index_dir_for(trace.path)
    stamp = _stamp(trace)
    stamp_path = os.path.join(d, "stamp.json")
    if os.path.exists(stamp_path):
        try:
            with open(stamp_path) as f:
                if json.load(f) == stamp:
                    return trace, d
        except (OSError, ValueError):
            pass
    os.makedirs(d, exist_ok=True)
    for t in TABLES:
        schema = pa.schema([pa.field("shard", pa.string())] + [pa.field(f.name, f.type) for f in SCHEMAS[t]])
        tmp = os.path.join(d, t + ".parquet.tmp")
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
            for s in trace.shards:
                tbl = s.streams[t].table.select(SCHEMAS[t].names)
                tbl = tbl.add_column(0, "shard", pa.array([s.name] * len(tbl), pa.string()))
                tbl = pa.Table.from_arrays(tbl.columns, schema=schema)
                for batch in tbl.to_batches(max_chunksize=262144):
                    w.write_batch(batch)
        os.replace(tmp, os.path.join(d, t + ".parquet"))
    with open(stamp_path, "w") as f:
        json.dump(stamp, f)
    return trace, d
