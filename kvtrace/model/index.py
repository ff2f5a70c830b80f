"""The `_index/` cache: every table of every shard as one Parquet file,
``_index/<table>/<shard>.parquet`` with a leading ``shard`` column, so DuckDB reads the
trace out of core.

Built on first open, batch by batch from the stream files (memory stays bounded), two
files at a time, lz4-compressed. Whether it is current is
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
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from ..tracer.reader import Trace, conform, open_trace, shard_dirs, shard_summary, usable_summary
from ..tracer.schema import SCHEMAS, TABLES

INDEX_DIR = "_index"
INDEX_VERSION = 3   # 3: seq notes judged from the set of seqs, not row order (reader.SeqScan)
STAMP = "stamp.json"


def _shard_stamp(shard) -> dict:
    """{table: [size, mtime_ns]} of one shard's stream files (missing ones left out)."""
    return _files_stamp(shard.path)


def _files_stamp(shard_path: str) -> dict:
    files = {}
    for t in TABLES:
        p = os.path.join(shard_path, t + ".arrows")
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


def scan_paths(trace: Trace, index_dir: str, table: str) -> list[str]:
    """table_paths() with the file of most rows first, for a DuckDB view over them (the
    derived tables are sets, so the scan's file order does not matter to them). DuckDB
    estimates a scan of several Parquet files as its first file's rows times their
    number: with an empty file first (decode's descriptors) it took 13.6M descriptor
    ends for ~0 rows and built desc_end's range join's hash table on them instead of on
    the layouts — all of them in memory, past any cap at 100M events."""
    paths = table_paths(trace, index_dir, table)
    rows = []
    for p in paths:
        try:
            rows.append(pq.ParquetFile(p).metadata.num_rows)
        except (OSError, pa.ArrowInvalid):
            rows.append(0)
    return [p for _, p in sorted(zip(rows, paths), key=lambda rp: -rp[0])]


def read_table(trace: Trace, index_dir: str, table: str, columns: list[str] | None = None) -> pa.Table:
    """One table of the index as Arrow, shards in the trace's order, rows in file order."""
    parts = [pq.read_table(p, columns=columns) for p in table_paths(trace, index_dir, table)]
    return pa.concat_tables(parts)


def _file(index_dir: str, table: str, shard: str) -> str:
    return os.path.join(index_dir, table, shard + ".parquet")


def _stamp_part(path: str, part: str) -> dict:
    """One part of the index stamp (``shards``: the stream files' sizes and mtimes the index
    was built from; ``summaries``: what the streams held), {} when the stamp is missing,
    damaged or of another index version."""
    try:
        with open(path) as f:
            old = json.load(f)
        if isinstance(old, dict) and old.get("index_version") == INDEX_VERSION and isinstance(old.get(part), dict):
            return old[part]
    except (OSError, ValueError):
        pass
    return {}


def _load_summaries(path: str) -> dict:
    return _stamp_part(path, "summaries")


def _load_stamp(path: str) -> dict:
    return _stamp_part(path, "shards")


#: rows per Parquet row group of the index (DuckDB scans row groups in parallel)
ROWS_PER_GROUP = 65536
#: lz4 decodes ~3x faster than zstd and writes ~2x faster (files ~1.5x larger); the index
#: is a cache on the trace's own disk, written on first open and read by every analysis
CODEC = "lz4"
#: string columns holding free text or per-request keys: dictionary-encoding them costs
#: more than it saves (a row group's dictionary overflows and falls back anyway)
FREE_TEXT = frozenset({"request", "detail"})
#: files written at once (threads)
WRITERS = 2


def write_options(schema: pa.Schema) -> dict:
    """ParquetWriter options of the index and the timeline: lz4, dictionary pages for
    the name/enum string columns only. Min/max statistics stay on every column: request
    keys cluster in time, so a ``request = ?`` scan of the timeline (the viewer's n/p)
    skips most row groups by them (4 ms instead of 15 ms at 1M events)."""
    strings = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    return {"compression": CODEC, "use_dictionary": [n for n in strings if n not in FREE_TEXT]}


def raw_batches(shard, table: str, with_shard: bool = True):
    """The stream's rows as the reader kept them (conformed, a truncated stream's
    complete prefix), read again from the file batch by batch into ordinary memory: the
    reader's table is memory-mapped, and touching all of it would keep the whole stream
    file resident (~2 GB at 10M events) while one batch at a time is written out."""
    kept = shard.streams[table]   # its rows only touched if the file changed since it was read
    want = kept.num_rows
    path = os.path.join(shard.path, table + ".arrows")
    if want == 0:
        return
    with pa.OSFile(path) as f:
        try:
            reader = ipc.open_stream(f)
        except (pa.ArrowException, OSError):   # replaced since it was read: the reader's rows
            yield _indexed(kept.table, shard.name, table, with_shard)
            return
        while want > 0:
            try:
                b = reader.read_next_batch()
            except (StopIteration, pa.ArrowException, OSError):
                break
            if b.num_rows > want:        # the file grew past what was read (a live shard)
                b = b.slice(0, want)
            want -= b.num_rows
            yield _indexed(conform(pa.Table.from_batches([b]), SCHEMAS[table]), shard.name, table, with_shard)
    if want > 0:   # the file changed under us: fall back to the reader's rows
        yield _indexed(kept.table.slice(kept.num_rows - want), shard.name, table, with_shard)


def _indexed(t: pa.Table, shard: str, table: str, with_shard: bool) -> pa.Table:
    """The format's columns of a stream's rows, the shard first when ``with_shard``."""
    t = t.select(SCHEMAS[table].names)
    if not with_shard:
        return t
    return pa.Table.from_arrays([pa.repeat(shard, t.num_rows)] + t.columns,
                                schema=pa.schema([pa.field("shard", pa.string())] + list(t.schema)))


def _write_table(d: str, shard, table: str) -> None:
    """One table of one shard to its Parquet file, ROWS_PER_GROUP rows at a time."""
    schema = pa.schema([pa.field("shard", pa.string())] + [pa.field(f.name, f.type) for f in SCHEMAS[table]])
    os.makedirs(os.path.join(d, table), exist_ok=True)
    out = _file(d, table, shard.name)
    tmp = out + ".tmp"
    with pq.ParquetWriter(tmp, schema, **write_options(schema)) as w:
        pending: list[pa.Table] = []
        rows = 0

        def write(final: bool) -> None:
            nonlocal pending, rows
            part = pa.concat_tables(pending) if pending else SCHEMAS[table].empty_table()
            n = part.num_rows if final else part.num_rows // ROWS_PER_GROUP * ROWS_PER_GROUP
            if n:
                cols = part.slice(0, n).columns
                w.write_table(pa.Table.from_arrays([pa.repeat(shard.name, n)] + cols, schema=schema),
                              row_group_size=ROWS_PER_GROUP)
            rest = part.slice(n)
            pending, rows = ([rest] if rest.num_rows else []), rest.num_rows
        for t in raw_batches(shard, table, with_shard=False):
            pending.append(t)
            rows += t.num_rows
            if rows >= ROWS_PER_GROUP:
                write(False)
        write(True)
    os.replace(tmp, out)


def _write_shards(d: str, shards: list) -> None:
    """Every table of the given shards, WRITERS files at a time: Arrow reads and Parquet
    encodes outside the GIL, so the files are written on both cores of a 2-core machine."""
    jobs = [(s, t) for s in shards for t in TABLES]
    # the big tables first so the two workers finish together
    jobs.sort(key=lambda j: -j[0].streams[j[1]].num_rows)
    if len(jobs) <= 1:
        for s, t in jobs:
            _write_table(d, s, t)
        return
    with ThreadPoolExecutor(max_workers=WRITERS) as ex:
        for f in [ex.submit(_write_table, d, s, t) for s, t in jobs]:
            f.result()


def ensure_index(trace: Trace | str) -> tuple[Trace, str]:
    """Build (or reuse, or bring up to date) the Parquet index of a trace; returns
    (trace, index folder). Only shards whose stream files changed are written.

    Given a path, and the index is current (same stream sizes and mtimes), the trace
    opens from the stamp's summaries without reading a stream (its streams then read
    only when asked for: everything that analyses reads the index)."""
    if isinstance(trace, str):
        path = os.fspath(trace).rstrip("/") or "/"
        d = index_dir_for(path)
        stamp_path = os.path.join(d, STAMP)
        old, summaries = _load_stamp(stamp_path), _load_summaries(stamp_path)
        # stat before reading: a live stream that grows meanwhile is re-indexed next time
        before = _dir_stamps(path)
        if before is not None and old == before and set(summaries) == set(before) \
                and all(usable_summary(sm) for sm in summaries.values()) \
                and all(os.path.exists(_file(d, t, n)) for n in before for t in TABLES):
            trace = open_trace(path, known=summaries)
            if [s.name for s in trace.shards] == sorted(before):
                return trace, d
        # rows only scanned (the index is written from the files batch by batch): the mapped
        # pages of a full read would stay resident (100M events: 4.4 GB peak, 17 s)
        trace = open_trace(path, scan_only=True)
        new = before if before is not None and sorted(before) == [s.name for s in trace.shards] \
            else {s.name: _shard_stamp(s) for s in trace.shards}
    else:
        new = {s.name: _shard_stamp(s) for s in trace.shards}
    d = index_dir_for(trace.path)
    stamp_path = os.path.join(d, STAMP)
    old = _load_stamp(stamp_path)
    fresh = {s.name: shard_summary(s) for s in trace.shards}
    if old == new and all(os.path.exists(_file(d, t, n)) for n in new for t in TABLES):
        if _load_summaries(stamp_path) != fresh:   # an index from before summaries were kept
            _write_stamp(stamp_path, new, fresh)
        return trace, d
    os.makedirs(d, exist_ok=True)
    # the stamp goes first: a crash mid-way leaves an index that is rebuilt, never trusted
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    _write_shards(d, [s for s in trace.shards
                      if old.get(s.name) != new[s.name] or not all(os.path.exists(_file(d, t, s.name)) for t in TABLES)])
    for name in set(old) - set(new):       # shards no longer in the trace
        for t in TABLES:
            if os.path.exists(_file(d, t, name)):
                os.remove(_file(d, t, name))
    for t in TABLES:                        # an index of the previous layout
        if os.path.exists(os.path.join(d, t + ".parquet")):
            os.remove(os.path.join(d, t + ".parquet"))
    _write_stamp(stamp_path, new, fresh)
    return trace, d


def _write_stamp(stamp_path: str, shards: dict, summaries: dict) -> None:
    with open(stamp_path + ".tmp", "w") as f:
        json.dump({"index_version": INDEX_VERSION, "shards": shards, "summaries": summaries}, f)
    os.replace(stamp_path + ".tmp", stamp_path)


def _dir_stamps(path: str) -> dict | None:
    """{shard: its _shard_stamp} read from the folder alone (None: it cannot be listed;
    open_trace then says why)."""
    try:
        return {n: _files_stamp(os.path.join(path, n)) for n in shard_dirs(path)}
    except OSError:
        return None
