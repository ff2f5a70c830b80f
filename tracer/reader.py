"""Reader: open a trace directory (all shards), validate it, keep every complete batch.

``open_trace(path)`` returns a :class:`Trace`; problems that still leave data usable
(truncated streams, unclosed or missing shards) are collected in ``Trace.notes``;
problems that make the trace unusable raise :class:`TraceError` with one clear line.
"""
from __future__ import annotations

import dataclasses
import json
import os

import pyarrow as pa
import pyarrow.ipc as ipc

from ..errors import TraceError
from .schema import FORMAT_NAME, MANIFEST, REQUIRED_COLUMNS, SCHEMA_VERSION, SCHEMAS, SHARD_INFO, TABLES


@dataclasses.dataclass
class StreamRead:
    """One table of one shard as read back."""
    table: pa.Table
    batches: int
    truncated: bool = False
    lost_bytes: int = 0


@dataclasses.dataclass
class Shard:
    name: str
    path: str
    info: dict
    streams: dict[str, StreamRead]

    @property
    def closed(self) -> bool:
        return bool(self.info.get("closed"))


def read_stream(path: str, schema: pa.Schema, required: tuple[str, ...] = ()) -> StreamRead:
    """Read an Arrow IPC stream batch by batch, keeping the prefix of a truncated one.

    A column in ``required`` that the stream lacks makes the trace unusable (TraceError):
    the contract (docs/format.md) requires it, and filling it with nulls would pass off
    a foreign writer's trace as one with no facts of that kind."""
    size = os.path.getsize(path)
    if size == 0:
        return StreamRead(schema.empty_table(), 0, truncated=True)
    source = pa.memory_map(path)
    try:
        reader = ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError) as e:
        raise TraceError(f"{path}: not an Arrow IPC stream ({_short(e)})") from None
    batches, good_pos, truncated = [], 0, False
    while True:
        try:
            batches.append(reader.read_next_batch())
            good_pos = source.tell()
        except StopIteration:
            good_pos = size
            break
        except (pa.ArrowInvalid, OSError):
            truncated = True
            break
    file_schema = reader.schema
    ver = (file_schema.metadata or {}).get(b"kvtrace.version")
    if ver is not None and int(ver) != SCHEMA_VERSION:
        raise TraceError(f"{path}: written by trace format version {int(ver)}; this kvtrace reads version {SCHEMA_VERSION}")
    missing = [c for c in required if c not in file_schema.names]
    if missing:
        raise TraceError(f"{path}: lacks the required column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (see the trace format, docs/format.md)")
    table = pa.Table.from_batches(batches, schema=file_schema)
    return StreamRead(_conform(table, schema), sum(1 for b in batches if b.num_rows), truncated, max(0, size - good_pos) if truncated else 0)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Add missing optional columns as nulls and cast to the canonical types (extras kept)."""
    cols, fields = [], []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            if col.type != field.type:
                try:
                    col = col.cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise TraceError(f"column {field.name} has type {col.type}, expected {field.type} ({_short(e)})") from None
        else:
            col = pa.nulls(len(table), field.type)
        cols.append(col)
        fields.append(pa.field(field.name, field.type))
    for name in table.column_names:
        if name not in schema.names:
            cols.append(table.column(name))
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def _short(e: Exception) -> str:
    return str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__


@dataclasses.dataclass
class Trace:
    """An opened trace: manifest, shards, and notes about what is missing or cut short."""
    path: str
    manifest: dict
    shards: list[Shard]
    notes: list[str]

    def table(self, name: str, shard: str | None = None) -> pa.Table:
        """All shards' rows of table ``name`` with a leading ``shard`` column."""
        parts = []
        for s in self.shards:
            if shard is not None and s.name != shard:
                continue
            t = s.streams[name].table
            t = t.select(SCHEMAS[name].names)  # common columns only, so shards concatenate
            parts.append(t.add_column(0, "shard", pa.array([s.name] * len(t), pa.string())))
        if not parts:
            return SCHEMAS[name].empty_table().add_column(0, "shard", pa.array([], pa.string()))
        return pa.concat_tables(parts)

    def shard(self, name: str) -> Shard:
        for s in self.shards:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def truncated(self) -> bool:
        return any(st.truncated for s in self.shards for st in s.streams.values())


def shard_dirs(path: str) -> list[str]:
    """Shard folder names of a trace (every folder not starting with '_' or '.')."""
    return sorted(d for d in os.listdir(path)
                  if os.path.isdir(os.path.join(path, d)) and not d.startswith(("_", ".")))


def read_manifest(path: str) -> dict:
    """Validate and return manifest.json, raising TraceError with one clear line."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such trace directory")
    if not os.path.isdir(path):
        raise TraceError(f"{path}: not a trace directory (a trace is a folder with manifest.json)")
    man_path = os.path.join(path, MANIFEST)
    if not os.path.isfile(man_path):
        raise TraceError(f"{path}: not a kvtrace trace (no {MANIFEST})")
    try:
        with open(man_path) as f:
            man = json.load(f)
    except (ValueError, OSError) as e:
        raise TraceError(f"{man_path}: unreadable manifest ({_short(e)})") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT_NAME:
        raise TraceError(f"{man_path}: not a kvtrace manifest (format={man.get('format') if isinstance(man, dict) else None!r})")
    if man.get("version") != SCHEMA_VERSION:
        raise TraceError(f"{path}: trace format version {man.get('version')!r}; this kvtrace reads version {SCHEMA_VERSION}")
    return man


def open_trace(path: str) -> Trace:
    """Open a trace directory; raises TraceError when it cannot be used at all."""
    path = os.fspath(path).rstrip("/") or "/"
    man = read_manifest(path)
    notes: list[str] = []
    present = shard_dirs(path)
    listed = man.get("shards") or []
    for name in listed:
        if name not in present:
            notes.append(f"shard {name}: listed in the manifest but missing — its events are not in this analysis")
    if not present:
        raise TraceError(f"{path}: the trace has no shards")
    shards = []
    for name in present:
        sdir = os.path.join(path, name)
        try:
            with open(os.path.join(sdir, SHARD_INFO)) as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = {}
            notes.append(f"shard {name}: missing or unreadable {SHARD_INFO}")
        if info and not info.get("closed"):
            notes.append(f"shard {name}: not closed (the process stopped while recording; data up to its last flush is used)")
        streams = {}
        for tname in TABLES:
            p = os.path.join(sdir, tname + ".arrows")
            if not os.path.isfile(p):
                notes.append(f"shard {name}: missing {tname}.arrows (treated as empty)")
                streams[tname] = StreamRead(SCHEMAS[tname].empty_table(), 0, truncated=True)
                continue
            sr = read_stream(p, SCHEMAS[tname], REQUIRED_COLUMNS[tname])
            if sr.truncated:
                notes.append(f"shard {name}: {tname}.arrows truncated — kept {sr.batches} complete batches "
                             f"({sr.table.num_rows} rows), lost {sr.lost_bytes} trailing bytes")
            streams[tname] = sr
        shards.append(Shard(name, sdir, info, streams))
    return Trace(path, man, shards, notes)
