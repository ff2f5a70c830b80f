"""The `_index/` cache: every table of every shard as one Parquet file,
``_index/<table>/<shard>.parquet`` with a leading ``shard`` column, so DuckDB reads the
trace out of core.

Built on first open (batch by batch: memory stays bounded). Whether it is current is
decided from the shard stream files' sizes and mtimes alone (``stamp.json``), never by
re-reading the trace; when shards are appended or a live shard grows, only the shards
whose files changed are re-indexed (and files of shards gone are removed). A read-only
trace gets its index in a temp folder.
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
INDEX_VERSION = 2
STAMP = "stamp.json"


def _shard_stamp(shard) -> dict:
    """{table: [size, mtime_ns]} of one shard's stream files (missing ones left out)."""
    files = {}
    for t in TABLES:
        p = os.path.join(shard.path, t + ".arrows")
        if os.path.exists(p):
            st = os.stat(p)
            files[t] = [st.st_size, st.st_mtime_ns]
    return files


def index_dir_for(trace_path: str) -> str:
    d = os.path.join(trace_path, INDEX_DIR)
    if os.access(trace_path, os.W_OK):
        return d
    h = hashlib.sha1(os.path.abspath(trace_path).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"kvtrace-index-{h}")


def table_paths(trace: Trace, index_dir: str, table: str) -> list[str]:
    """The Parquet files of one table, in the trace's shard order (read them as one)."""
    return [_file(index_dir, table, s.name) for s in trace.shards]


def read_table(trace: Trace, index_dir: str, table: str, columns: list[str] | None = None) -> pa.Table:
    """One table of the index as Arrow, shards in the trace's order, rows in file order."""
    parts = [pq.read_table(p, columns=columns) for p in table_paths(trace, index_dir, table)]
    return pa.concat_tables(parts)


def _file(index_dir: str, table: str, shard: str) -> str:
    return os.path.join(index_dir, table, shard + ".parquet")


def _load_stamp(path: str) -> dict:
    try:
        with open(path) as f:
            old = json.load(f)
        if isinstance(old, dict) and old.get("index_version") == INDEX_VERSION and isinstance(old.get("shards"), dict):
            return old["shards"]
    except (OSError, ValueError):
        pass
    return {}


def _write_shard(d: str, shard) -> None:
    for t in TABLES:
        schema = pa.schema([pa.field("shard", pa.string())] + [pa.field(f.name, f.type) for f in SCHEMAS[t]])
        os.makedirs(os.path.join(d, t), exist_ok=True)
        out = _file(d, t, shard.name)
        tmp = out + ".tmp"
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
            tbl = shard.streams[t].table.select(SCHEMAS[t].names)
            tbl = tbl.add_column(0, "shard", pa.array([shard.name] * len(tbl), pa.string()))
            tbl = pa.Table.from_arrays(tbl.columns, schema=schema)
            for batch in tbl.to_batches(max_chunksize=262144):
                w.write_batch(batch)
        os.replace(tmp, out)


def ensure_index(trace: Trace | str) -> tuple[Trace, str]:
    """Build (or reuse, or bring up to date) the Parquet index of a trace; returns
    (trace, index folder). Only shards whose stream files changed are written."""
    if isinstance(trace, str):
        trace = open_trace(trace)
    d = index_dir_for(trace.path)
    stamp_path = os.path.join(d, STAMP)
    old = _load_stamp(stamp_path)
    new = {s.name: _shard_stamp(s) for s in trace.shards}
    if old == new and all(os.path.exists(_file(d, t, n)) for n in new for t in TABLES):
        return trace, d
    os.makedirs(d, exist_ok=True)
    # the stamp goes first: a crash mid-way leaves an index that is rebuilt, never trusted
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    for s in trace.shards:
        if old.get(s.name) != new[s.name] or not all(os.path.exists(_file(d, t, s.name)) for t in TABLES):
            _write_shard(d, s)
    for name in set(old) - set(new):       # shards no longer in the trace
        for t in TABLES:
            if os.path.exists(_file(d, t, name)):
                os.remove(_file(d, t, name))
    for t in TABLES:                        # an index of the previous layout
        if os.path.exists(os.path.join(d, t + ".parquet")):
            os.remove(os.path.join(d, t + ".parquet"))
    with open(stamp_path + ".tmp", "w") as f:
        json.dump({"index_version": INDEX_VERSION, "shards": new}, f)
    os.replace(stamp_path + ".tmp", stamp_path)
    return trace, d
