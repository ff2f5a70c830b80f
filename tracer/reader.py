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

import numpy as np

from ..errors import TraceError
from .schema import (FORMAT_NAME, MANIFEST, REQUIRED_COLUMNS, SCHEMA_VERSION, SCHEMAS, SHARD_INFO,
                     TABLES, contract_nulls, contract_unpaired)


@dataclasses.dataclass
class StreamRead:
    """One table of one shard as read back (``rows``: set when the rows were only
    counted, read_stream(keep=False), and ``table`` is empty)."""
    table: pa.Table
    batches: int
    truncated: bool = False
    lost_bytes: int = 0
    rows: int | None = None

    @property
    def num_rows(self) -> int:
        return self.rows if self.rows is not None else self.table.num_rows

    def summary(self) -> dict:
        """What opening the trace again needs to know of this stream without reading it."""
        return {"rows": self.num_rows, "batches": self.batches, "truncated": self.truncated,
                "lost_bytes": self.lost_bytes}


class LazyStream:
    """A stream known from the trace index's summary (rows, batches, truncation) and read
    only when a reader asks for its rows: analysis reads the Parquet index, so opening a
    100M-event trace need not map and scan ~20 GB of stream files (17 s, 4 GB resident)."""

    def __init__(self, path: str, table_name: str, summary: dict) -> None:
        self.path, self.table_name = path, table_name
        self.batches = int(summary["batches"])
        self.truncated = bool(summary["truncated"])
        self.lost_bytes = int(summary["lost_bytes"])
        self._rows = int(summary["rows"])
        self._table: pa.Table | None = None

    @property
    def num_rows(self) -> int:
        return self._rows if self._table is None else self._table.num_rows

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            got = read_stream(self.path, SCHEMAS[self.table_name], REQUIRED_COLUMNS[self.table_name],
                              stream=self.table_name)
            # the rows the index holds: a live stream may have grown since it was indexed
            self._table = got.table.slice(0, self._rows) if got.table.num_rows > self._rows else got.table
        return self._table

    @table.setter
    def table(self, value: pa.Table) -> None:
        self._table = value

    @property
    def loaded(self) -> bool:
        return self._table is not None

    def summary(self) -> dict:
        return {"rows": self.num_rows, "batches": self.batches, "truncated": self.truncated,
                "lost_bytes": self.lost_bytes}


@dataclasses.dataclass
class Shard:
    name: str
    path: str
    info: dict
    streams: dict[str, StreamRead]
    #: notes on this shard's streams (missing, cut short) and on its event seqs (gaps, order)
    stream_notes: list[str] = dataclasses.field(default_factory=list)
    seq_notes: list[str] = dataclasses.field(default_factory=list)
    #: the smallest event seq stored more than once (None: none): its order is unknown from there
    first_repeated_seq: int | None = None

    @property
    def closed(self) -> bool:
        return bool(self.info.get("closed"))


def read_stream(path: str, schema: pa.Schema, required: tuple[str, ...] = (), keep: bool = True,
                on_batch=None, stream: str | None = None) -> StreamRead:
    """Read an Arrow IPC stream batch by batch, keeping the prefix of a truncated one.
    ``required``: columns the format requires (a stream without one is refused);
    ``stream``: which of the format's streams it is (events, descs, ...): a null where the
    contract needs a value (schema.contract_nulls) is refused; None: only the schema's
    non-nullable columns are checked.

    ``keep=False``: the rows are only looked at, one batch at a time (``on_batch`` gets
    each, conformed), through ordinary reads instead of a memory map, and the result
    holds an empty table with the counts: the trace index's first build, which writes
    the rows from the files itself (at 100M events the mapped pages a full read touches
    are ~1.2 GB per events stream)."""
    size = os.path.getsize(path)
    if size == 0:
        return StreamRead(schema.empty_table(), 0, truncated=True)
    source = pa.memory_map(path) if keep else pa.OSFile(path)
    try:
        return _read_batches(path, source, size, schema, required, keep, on_batch, stream)
    finally:
        if not keep:
            source.close()


def _read_batches(path, source, size, schema, required, keep, on_batch, stream) -> StreamRead:
    try:
        reader = ipc.open_stream(source)
    except (pa.ArrowException, OSError) as e:
        if _cut_in_header(path, size):   # a crash while the stream's schema was being written
            return StreamRead(schema.empty_table(), 0, truncated=True, lost_bytes=size)
        raise TraceError(f"{path}: not an Arrow IPC stream ({_short(e)})") from None
    file_schema = reader.schema
    try:
        file_schema.names
    except UnicodeDecodeError:   # a flipped bit in the schema message
        raise TraceError(f"{path}: the stream's schema is corrupt (a column name is not UTF-8)") from None
    ver = (file_schema.metadata or {}).get(b"kvtrace.version")
    if ver is not None and ver != str(SCHEMA_VERSION).encode():
        raise TraceError(f"{path}: written by trace format version {_printable(ver)}; "
                         f"this kvtrace reads version {SCHEMA_VERSION}")
    missing = [c for c in required if c not in file_schema.names]
    if missing:
        raise TraceError(f"{path}: lacks the required column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    batches, good_pos, truncated, rows, nonempty, nulls, nread = [], 0, False, 0, 0, {}, 0
    unpaired: dict = {}
    while True:
        try:
            b = reader.read_next_batch()
            good_pos = source.tell()
            nread += 1
        except StopIteration:
            good_pos = size
            break
        except (pa.ArrowInvalid, OSError):
            truncated = True
            break
        except pa.ArrowException as e:   # a message that reads but names what is not there
            raise TraceError(f"{path}: record batch {nread + 1} is corrupt ({_short(e)})") from None
        try:   # a whole batch whose buffers lie (a flipped offset: a string "2^64 bytes long")
            b.validate(full=True)   # is damage, not a crash's cut: ~0.4 cpu-s per 10M events
        except pa.ArrowInvalid:
            raise TraceError(f"{path}: record batch {nread} is corrupt{corrupt_column(b)}") from None
        rows, nonempty = rows + b.num_rows, nonempty + (1 if b.num_rows else 0)
        if keep:
            batches.append(b)
        else:
            part = _table_of(path, [b], file_schema, schema)
            for name, n in _nulls(part, schema, stream).items():
                nulls[name] = nulls.get(name, 0) + n
            for pair, n in (contract_unpaired(stream, part) if stream else {}).items():
                unpaired[pair] = unpaired.get(pair, 0) + n
            if on_batch is not None and not any(nulls.values()) and not any(unpaired.values()):
                on_batch(part)
    if not keep:
        _refuse_nulls(path, nulls)
        _refuse_unpaired(path, unpaired)
        return StreamRead(schema.empty_table(), nonempty, truncated, max(0, size - good_pos) if truncated else 0,
                          rows=rows)
    table = _table_of(path, batches, file_schema, schema)
    _refuse_nulls(path, _nulls(table, schema, stream))
    _refuse_unpaired(path, contract_unpaired(stream, table) if stream else {})
    return StreamRead(table, nonempty, truncated, max(0, size - good_pos) if truncated else 0)


def corrupt_column(batch: pa.RecordBatch) -> str:
    """' (column NAME: what is wrong)' for the first column of ``batch`` that fails validation."""
    for name, col in zip(batch.schema.names, batch.columns):
        try:
            col.validate(full=True)
        except pa.ArrowInvalid as e:
            return f" (column {_printable(name)}: {_short(e).split('Invalid: ')[-1]})"
    return ""


def _table_of(path: str, batches: list, file_schema: pa.Schema, schema: pa.Schema) -> pa.Table:
    try:
        table = pa.Table.from_batches(batches, schema=file_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:  # a batch whose schema differs from the stream's
        raise TraceError(f"{path}: inconsistent record batches ({_short(e)})") from None
    return _conform(table, schema)


def _nulls(table: pa.Table, schema: pa.Schema, stream: str | None) -> dict[str, int]:
    if stream is None:
        return {f.name: table.column(f.name).null_count for f in schema if not f.nullable}
    return contract_nulls(stream, table)


def _refuse_nulls(path: str, nulls: dict) -> None:
    """The format's not-null columns (docs/format.md): keys every reader joins on, and the
    addresses, sizes and geometry replay and the checks compute with."""
    for name, n in nulls.items():
        if n:
            raise TraceError(f"{path}: column {name} has {n} null "
                             f"value(s); the format requires every row to have one")


def _refuse_unpaired(path: str, unpaired: dict) -> None:
    """A descriptor's index and its prepared list come together (schema.PAIRED_COLUMNS)."""
    for (a, b), n in unpaired.items():
        if n:
            raise TraceError(f"{path}: {n} row(s) hold one of {a} and {b} without the other; "
                             f"the format requires both or neither")


def _cut_in_header(path: str, size: int) -> bool:
    """The file is the start of an Arrow IPC stream cut inside its schema message: it
    begins with the IPC continuation marker and the message it announces runs past the
    end of the file."""
    with open(path, "rb") as f:
        head = f.read(8)
    marker = b"\xff\xff\xff\xff"
    if len(head) < 4:
        return marker.startswith(head)
    if head[:4] != marker:
        return False
    return len(head) < 8 or 8 + int.from_bytes(head[4:8], "little") > size


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


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A stream's rows in the format's canonical columns and types, as read_stream keeps
    them (for readers that stream a file again batch by batch: the trace index)."""
    return _conform(table, schema)


def _short(e: Exception) -> str:
    return _printable(str(e).strip().splitlines()[0][:160]) if str(e).strip() else type(e).__name__


def _printable(v) -> str:
    """A value from a trace, shown on one line whatever it holds."""
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "?" for c in str(v))[:160]


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
        # an empty stream (cut before its first batch) has the canonical schema, the others
        # their file's (nullability, metadata): unify them
        return pa.concat_tables(parts, promote_options="default")

    def shard(self, name: str) -> Shard:
        for s in self.shards:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def truncated(self) -> bool:
        return any(st.truncated for s in self.shards for st in s.streams.values())


def shard_dirs(path: str) -> list[str]:
    """Shard folder names of a trace (every folder not starting with '_' or '.'; a
    symbolic link is never a shard, so nothing outside the trace directory is read)."""
    return sorted(d for d in os.listdir(path)
                  if not d.startswith(("_", ".")) and _real_dir(os.path.join(path, d)))


def _real_dir(p: str) -> bool:
    return os.path.isdir(p) and not os.path.islink(p)


def _inside(path: str, name: str) -> str:
    """``path/name`` for a file of the trace, refused when it is a symbolic link (a shared
    trace must not make kvtrace read elsewhere)."""
    p = os.path.join(path, name)
    if os.path.islink(p):
        raise TraceError(f"{p}: a symbolic link inside the trace; refusing to follow it")
    return p


def read_manifest(path: str) -> dict:
    """Validate and return manifest.json, raising TraceError with one clear line."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such trace directory")
    if not os.path.isdir(path):
        raise TraceError(f"{path}: not a trace directory (a trace is a folder with manifest.json)")
    man_path = _inside(path, MANIFEST)
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
        raise TraceError(f"{path}: trace format version {_printable(repr(man.get('version')))}; "
                         f"this kvtrace reads version {SCHEMA_VERSION}")
    shards = man.get("shards", [])
    if not isinstance(shards, list) or not all(isinstance(n, str) for n in shards):
        raise TraceError(f"{man_path}: 'shards' must be a list of shard names")
    for name in shards:
        if not valid_shard_name(name):
            raise TraceError(f"{man_path}: shard name {_printable(repr(name))} is not a plain folder name "
                             f"(a trace only reads inside its own directory)")
    return man


def valid_shard_name(name: str) -> bool:
    """A shard name is one plain folder name: no separators, no '..', nothing hidden."""
    return (isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..")
            and "/" not in name and "\\" not in name and "\0" not in name
            and not name.startswith(("_", ".")) and name.isprintable())


def open_trace(path: str, known: dict | None = None, scan_only: bool = False) -> Trace:
    """Open a trace directory; raises TraceError when it cannot be used at all.

    ``known``: per shard, what an earlier open found in its stream files (shard_summary),
    given by the trace index when the files have not changed since (same sizes and
    mtimes): those shards' streams are then read only when a reader asks for their rows.
    ``scan_only``: the other shards' streams are scanned batch by batch for what the
    summary holds, and likewise read again only when asked for (the index's first build)."""
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
        info = _shard_info(sdir, name, notes)
        window = ring_window_of(info)
        if window is not None:   # a flight-recorder dump: unclosed and seq jumps by design
            notes.append(f"shard {name}: a flight-recorder window ({window}), not a whole run: what happened "
                         "after its end is unknown")
        elif info and not info.get("closed"):
            notes.append(f"shard {name}: not closed (the process stopped while recording; data up to its last flush is used)")
        summary = (known or {}).get(name)
        if usable_summary(summary):
            streams, stream_notes, seq_notes, repeated = _known_streams(sdir, summary)
        else:
            streams, stream_notes, seq_notes, repeated = _read_streams(sdir, name, scan_only, window is not None)
        notes.extend(stream_notes)
        notes.extend(_loss_notes(name, info))
        notes.extend(seq_notes)
        shards.append(Shard(name, sdir, info, streams, stream_notes, seq_notes, repeated))
    return Trace(path, man, shards, notes)


def ring_window_of(info) -> str | None:
    """What a flight-recorder dump's shard says of its window (shard.json ``ring``: the
    trigger's reason), or None: not a ring window."""
    ring = info.get("ring") if isinstance(info, dict) else None
    if not isinstance(ring, dict) or not isinstance(ring.get("window"), dict):
        return None
    trig = ring.get("trigger")
    reason = trig.get("reason") if isinstance(trig, dict) else None
    return f"dumped on: {_printable(reason)}" if isinstance(reason, str) and reason else "dumped on a trigger"


def _read_streams(sdir: str, name: str, scan_only: bool = False,
                  window: bool = False) -> tuple[dict, list[str], list[str], int | None]:
    """Every stream of a shard read (memory-mapped; ``scan_only``: scanned, see
    open_trace); the notes on streams missing or cut short, and on event seqs out of
    sequence; and the first seq stored more than once (None: none)."""
    streams, notes, seqs = {}, [], SeqScan()
    for tname in TABLES:
        p = _inside(sdir, tname + ".arrows")
        if not os.path.isfile(p):
            notes.append(f"shard {name}: missing {tname}.arrows (treated as empty)")
            streams[tname] = StreamRead(SCHEMAS[tname].empty_table(), 0, truncated=True)
            continue
        if scan_only:
            sr = read_stream(p, SCHEMAS[tname], REQUIRED_COLUMNS[tname], keep=False,
                             on_batch=seqs.feed if tname == "events" else None, stream=tname)
        else:
            sr = read_stream(p, SCHEMAS[tname], REQUIRED_COLUMNS[tname], stream=tname)
            if tname == "events":
                seqs.feed(sr.table)
        if sr.truncated:
            notes.append(f"shard {name}: {tname}.arrows truncated — kept {sr.batches} complete batches "
                         f"({sr.num_rows} rows), lost {sr.lost_bytes} trailing bytes")
        streams[tname] = LazyStream(p, tname, sr.summary()) if scan_only else sr
    return streams, notes, seqs.notes(name, window), seqs.first_repeated()


def shard_summary(shard: "Shard") -> dict:
    """What open_trace(known=...) needs to open this shard again without reading its
    streams: each stream's rows, batches and truncation (None: no file), and the notes
    reading them gave."""
    return {"streams": {t: (shard.streams[t].summary() if os.path.isfile(os.path.join(shard.path, t + ".arrows"))
                            else None) for t in TABLES},
            "stream_notes": list(shard.stream_notes), "seq_notes": list(shard.seq_notes),
            "first_repeated_seq": shard.first_repeated_seq}


def usable_summary(summary) -> bool:
    if not (isinstance(summary, dict) and isinstance(summary.get("streams"), dict)
            and isinstance(summary.get("stream_notes"), list) and isinstance(summary.get("seq_notes"), list)):
        return False
    def counts(st) -> bool:   # the index is a file in the trace folder: checked like the trace
        return isinstance(st, dict) and isinstance(st.get("truncated"), bool) and all(
            isinstance(st.get(k), int) and not isinstance(st.get(k), bool) and st[k] >= 0
            for k in ("rows", "batches", "lost_bytes"))
    return all(t in summary["streams"] and (summary["streams"][t] is None or counts(summary["streams"][t]))
               for t in TABLES) and all(isinstance(n, str) for n in summary["stream_notes"] + summary["seq_notes"]) \
        and "first_repeated_seq" in summary and (summary["first_repeated_seq"] is None or (
            isinstance(summary["first_repeated_seq"], int) and not isinstance(summary["first_repeated_seq"], bool)))


def _known_streams(sdir: str, summary: dict) -> tuple[dict, list[str], list[str], int | None]:
    streams = {}
    for tname in TABLES:
        p = _inside(sdir, tname + ".arrows")
        known = summary["streams"][tname]
        if known is None or not os.path.isfile(p):
            streams[tname] = StreamRead(SCHEMAS[tname].empty_table(), 0, truncated=True)
        else:
            streams[tname] = LazyStream(p, tname, known)
    return (streams, [str(n) for n in summary["stream_notes"]], [str(n) for n in summary["seq_notes"]],
            summary["first_repeated_seq"])


def _shard_info(sdir: str, name: str, notes: list[str]) -> dict:
    try:
        with open(_inside(sdir, SHARD_INFO)) as f:
            info = json.load(f)
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict):
        notes.append(f"shard {name}: missing or unreadable {SHARD_INFO}")
        return {}
    return info


def _count(v) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def lost_rows(info) -> dict[str, int]:
    """Rows per table a recorder counted lost (shard.json ``lost.rows``: a write that failed for
    good, or values it could not encode), wherever in the stream they were."""
    lost = info.get("lost") if isinstance(info, dict) else None
    rows = lost.get("rows") if isinstance(lost, dict) else None
    return {str(k): _count(v) for k, v in rows.items() if _count(v)} if isinstance(rows, dict) else {}


def untraced_counts(info) -> dict[str, int]:
    """Postings NIXL ran that a recorder saw but could not record, by reason (shard.json
    ``untraced_postings``)."""
    why = info.get("untraced_postings") if isinstance(info, dict) else None
    return {str(k): _count(v) for k, v in why.items() if _count(v)} if isinstance(why, dict) else {}


def _loss_notes(name: str, info: dict) -> list[str]:
    """What the recorder said it could not write or did not see (shard.json)."""
    notes = []
    lost = info.get("lost")
    if isinstance(lost, dict) and isinstance(lost.get("rows"), dict):
        rows = {str(k): _count(v) for k, v in lost["rows"].items() if _count(v)}
        if rows:
            reasons = lost.get("reasons") if isinstance(lost.get("reasons"), dict) else {}
            why = ", ".join(f"{_printable(k)}: {_count(v):,}" for k, v in reasons.items() if _count(v))
            what = ", ".join(f"{n:,} {_printable(t)}" for t, n in rows.items())
            notes.append(f"shard {name}: the recorder lost {sum(rows.values()):,} rows ({what})"
                         + (f" — {why}" if why else "") + "; findings about them may be missing")
    untraced = info.get("untraced_postings")
    if isinstance(untraced, dict):
        counts = {_printable(k): _count(v) for k, v in untraced.items() if _count(v)}
        if counts:
            notes.append(f"shard {name}: {sum(counts.values()):,} transfer postings went to NIXL untraced ("
                         + ", ".join(f"{k}: {v:,}" for k, v in counts.items())
                         + ") — the bytes they moved are not in this analysis")
    return notes


def _seq_notes(name: str, events: pa.Table) -> list[str]:
    """Gaps in a shard's event seqs (events the trace does not hold) and seqs out of order."""
    scan = SeqScan()
    scan.feed(events)
    return scan.notes(name)


class SeqScan:
    """_seq_notes over a stream's batches one at a time (the first index build reads the
    streams without keeping them).

    Which seqs are missing or repeated is a property of the set of seqs, not of the order
    the rows are stored in: a stream whose rows are out of seq order (a writer that
    flushes threads' batches apart, a file re-sorted by another tool) holds every event
    all the same, and the analysis reads events in seq order. While the rows increase,
    the scan keeps the seqs as contiguous runs (one run per gap: a recorder numbers its
    events contiguously, so usually one); from the first step back on it keeps the later
    seqs themselves to sort them at the end (only such a stream pays for that)."""

    def __init__(self) -> None:
        self.n = self.n_back = 0
        self.last: int | None = None
        self.first_back = None
        self.run_lo: list[np.ndarray] = []   # the increasing prefix as runs of contiguous seqs
        self.run_hi: list[np.ndarray] = []
        self.rest: list[np.ndarray] = []  # seqs after the first step back, as stored
        self._counted = None              # (rows fed, _set()) of the last count

    def feed(self, events: pa.Table) -> None:
        for chunk in events.column("seq").chunks:
            if not len(chunk):
                continue
            if chunk.null_count:   # nulls: the column is required non-null
                chunk = chunk.fill_null(-1)
            v = np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=np.int64)
            seq = v if self.last is None else np.concatenate((np.array([self.last], np.int64), v))
            step = np.diff(seq)
            back = np.flatnonzero(step <= 0)
            if len(back):
                if self.first_back is None:
                    self.first_back = (int(seq[back[0] + 1]), int(seq[back[0]]))
                self.n_back += len(back)
            if self.rest or len(back):
                # the prefix before the first step back stays runs; the rest is kept
                k = 0 if self.rest else int(back[0]) + (0 if self.last is None else -1) + 1
                if k:
                    self._runs(v[:k])
                self.rest.append(v[k:].copy())
            else:
                self._runs(v)
            self.last, self.n = int(v[-1]), self.n + len(v)

    def _runs(self, v: np.ndarray) -> None:
        """Add strictly increasing seqs (each above every seq so far) as contiguous runs."""
        brk = np.flatnonzero(np.diff(v) != 1)
        lo, hi = v[np.r_[0, brk + 1]], v[np.r_[brk, len(v) - 1]]
        if self.run_hi and int(lo[0]) == int(self.run_hi[-1][-1]) + 1:   # continues the last run
            self.run_hi[-1] = self.run_hi[-1].copy()
            self.run_hi[-1][-1] = hi[0]
            lo, hi = lo[1:], hi[1:]
        if len(lo):
            self.run_lo.append(lo)
            self.run_hi.append(hi)

    def _set(self) -> tuple[int, int, int, tuple[int, int] | None, int | None]:
        """(seqs missing between the smallest and the largest, gaps, seqs stored more than
        once, the first gap (last seq before it, first after), the first repeated seq)."""
        if self._counted is None or self._counted[0] != self.n:
            self._counted = (self.n, self._count())
        return self._counted[1]

    def _count(self) -> tuple[int, int, int, tuple[int, int] | None, int | None]:
        lo = np.concatenate(self.run_lo) if self.run_lo else np.zeros(0, np.int64)
        hi = np.concatenate(self.run_hi) if self.run_hi else np.zeros(0, np.int64)
        dup, first_dup = 0, None
        if self.rest:
            rest = np.sort(np.concatenate(self.rest))
            uniq = np.unique(rest)
            # repeated within the rest, or equal to a seq of the prefix's runs
            i = np.searchsorted(lo, uniq, side="right") - 1
            inrun = (i >= 0) & (uniq <= hi[np.maximum(i, 0)]) if len(lo) else np.zeros(len(uniq), bool)
            dup = len(rest) - len(uniq) + int(inrun.sum())
            if dup:
                reps = np.r_[rest[1:][np.diff(rest) == 0], uniq[inrun]]
                first_dup = int(reps.min())
            lo = np.concatenate((lo, uniq[~inrun]))
            hi = np.concatenate((hi, uniq[~inrun]))
            order = np.argsort(lo, kind="stable")
            lo, hi = lo[order], hi[order]
        if not len(lo):
            return 0, 0, dup, None, None
        # merge touching runs; what lies between two merged runs is missing
        hole = lo[1:] > np.maximum.accumulate(hi)[:-1] + 1
        starts = np.flatnonzero(hole) + 1
        top = np.maximum.accumulate(hi)
        missing = int(np.sum(lo[starts] - top[starts - 1] - 1)) if len(starts) else 0
        first_gap = (int(top[starts[0] - 1]), int(lo[starts[0]])) if len(starts) else None
        return missing, len(starts), dup, first_gap, first_dup

    def first_repeated(self) -> int | None:
        """The smallest seq the stream holds more than once (None: none): from there on the
        shard's event order is unknown (the cut ends the analysed part before it)."""
        return self._set()[4] if self.n_back else None

    def notes(self, name: str, window: bool = False) -> list[str]:
        """``window``: the shard is a flight-recorder window, whose seqs jump where the
        ring let go of events no kept fact needed (not a loss)."""
        if self.n < 2:
            return []
        notes = []
        missing, n_gaps, dup, first_gap, first_dup = self._set()
        if dup:
            notes.append(f"shard {name}: {dup:,} event seqs stored more than once (first: seq {first_dup}) — "
                         "this shard's event order is unreliable")
        elif self.n_back:
            after, before = self.first_back
            notes.append(f"shard {name}: events stored out of seq order in {self.n_back:,} places (first: seq {after} "
                         f"after {before}); they are analysed in seq order")
        if n_gaps and window:
            notes.append(f"shard {name}: {missing:,} events of the run are not in this window (its seqs jump "
                         f"in {n_gaps:,} places: the ring keeps what the window's facts refer to)")
        elif n_gaps:
            frm, to = first_gap
            notes.append(f"shard {name}: {missing:,} events missing from the trace — seq jumps in {n_gaps:,} places "
                         f"(first: from {frm} to {to})")
        return notes
