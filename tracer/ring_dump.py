"""The flight recorder's files: the trigger log every recorder polls, and the dumps.

Session directory ``S`` (the ``-o`` of a ring recording)::

    S/manifest.json            the session: command, workload, ring size, dumps so far
    S/_ring/manifest.json      the live ring recorders (one shard each, shard.json has pid)
    S/_ring/triggers.jsonl     one JSON line per trigger: n, reason, unix, pid, shard
    S.dump<n>/                 (``s.kvtrace`` -> ``s.dump1.kvtrace``) the trace trigger n wrote

A trigger appends a line (under a file lock) and lists the session's live shards in the
dump's manifest, so a process that dies before dumping shows as a missing shard. Each
recorder writes its own shard of the dump; the last one to finish marks it complete.
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import socket
import time

import pyarrow as pa

from . import manifest
from .schema import SCHEMAS, SHARD_INFO, TABLES

RING_DIR = "_ring"
TRIGGERS = "triggers.jsonl"


def staging_dir(session_dir: str) -> str:
    """Where a session's live recorders register (``S/_ring``)."""
    return os.path.join(session_dir, RING_DIR)


def dump_path(session_dir: str, n: int) -> str:
    """The trace written by trigger ``n``: ``s.kvtrace`` -> ``s.dump<n>.kvtrace``."""
    base = os.path.abspath(session_dir).rstrip("/")
    stem, ext = os.path.splitext(base)
    return f"{stem}.dump{n}{ext}" if ext == ".kvtrace" else f"{base}.dump{n}"


def live_shards(session_dir: str) -> list[str]:
    """Ring shards of the session still recording (registered, not closed, process alive
    when it runs on this host)."""
    d = staging_dir(session_dir)
    out = []
    for name in manifest.read(d).get("shards", []) if os.path.isdir(d) else []:
        try:
            with open(os.path.join(d, name, SHARD_INFO)) as f:
                info = json.load(f)
        except (OSError, ValueError):
            continue
        if info.get("closed"):
            continue
        if info.get("host") == socket.gethostname() and not _alive(int(info.get("pid") or 0)):
            continue
        out.append(name)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


LIVE = "live.jsonl"
#: the fixed-width first line of live.jsonl: ``{"gen": "<16 hex digits>"}``, new at every rewrite
_GEN_LEN = len('{"gen": "0123456789abcdef"}\n')
#: stop times per line of live.jsonl, at most
_LINE_TIMES = 1024
#: live.jsonl is rewritten whole once the lines appended since the last rewrite exceed
#: this many bytes and the full state's size
COMPACT_BYTES = 64 << 10


class LivePublisher:
    """One shard's side of the live-request exchange: ``S/_ring/<shard>/live.jsonl``.

    The file is a log: a header line (a generation token, new at every rewrite), the full
    state (every request this shard keeps live, when each other request it holds stopped
    being live, its ring's start, the dependencies it saw), then what each change brought:
    the live set again, and only the stop times and dependencies new since the last write
    (stop times at most ``_LINE_TIMES`` a line; the live set on the last line of a write).
    Nothing is written while nothing changed. Once the appended lines outgrow the full
    state (and :data:`COMPACT_BYTES`), the file is rewritten with the full state.

    Why: the stop times cover every request of the window and its slacks (thousands), and
    publishing all of them every flush (JSON-encoding them, and each reader decoding them)
    held the flush thread's GIL a few ms per flush, growing with the window; they rarely
    change once set. The readers (:class:`LiveReader`) keep what each shard published,
    so they see the same state as if the whole file were rewritten each time: a reader
    that reads late reads every line it missed (nothing is lost between two reads)."""

    def __init__(self, session_dir: str, shard: str):
        self.path = os.path.join(staging_dir(session_dir), shard, LIVE)
        self._live: list | None = None      # what the file says now (None: nothing written)
        self._last: dict = {}               # request -> stop time (monotonic ns) as published
        self._from_ns = None
        self._deps: set = set()
        self._appended = 0                  # bytes appended since the last full line
        self._full = 0                      # that full line's size
        self.writes = 0                     # lines written (full or not)

    def publish(self, live: list[str], last_ns: dict[str, int], from_ns: int | None, depends: list,
                unix_of) -> bool:
        """Write what changed since the last call (True if anything was written).
        ``last_ns`` and ``from_ns`` in this process's monotonic ns; ``unix_of(ns)`` turns
        one into wall-clock ns (what the file holds: comparable across hosts; integers, so
        a time that comes back from another shard compares equal)."""
        deps = set(map(tuple, depends))
        full = self._live is None or self._appended > max(COMPACT_BYTES, self._full)
        if full:
            changed, new_deps = last_ns, deps
        else:
            sent = self._last       # (a comprehension: 4x faster than a difference of item views)
            changed = {o: t for o, t in last_ns.items() if sent.get(o) != t}
            new_deps = deps - self._deps
            if not changed and not new_deps and live == self._live and from_ns == self._from_ns:
                return False
        # the stop times in lines of at most _LINE_TIMES (a rewrite's thousands are encoded,
        # and decoded by the readers, in calls short enough for the engine's threads to get
        # the GIL in between), the live set and the rest on the last line
        items = list(changed.items())
        lines = [json.dumps({"last_unix_ns": {o: unix_of(t) for o, t in items[i:i + _LINE_TIMES]}}) + "\n"
                 for i in range(0, len(items) - _LINE_TIMES, _LINE_TIMES)]
        rest = items[len(lines) * _LINE_TIMES:]
        lines.append(json.dumps({"live": live, "last_unix_ns": {o: unix_of(t) for o, t in rest},
                                 "from_unix": None if from_ns is None else unix_of(from_ns) / 1e9,
                                 "depends": [list(d) for d in (sorted(new_deps) if full else new_deps)]}) + "\n")
        text = "".join(lines)
        if full:
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write('{"gen": "%s"}\n' % os.urandom(8).hex() + text)
            os.replace(tmp, self.path)
            self._full, self._appended, self._last, self._deps = len(text), 0, dict(last_ns), deps
        else:
            with open(self.path, "a") as f:
                f.write(text)
            self._appended += len(text)
            self._last.update(changed)
            self._deps |= new_deps
        self._live, self._from_ns = list(live), from_ns
        self.writes += 1
        return True


class _Published:
    """What one other shard published, as read so far."""
    __slots__ = ("gen", "off", "live", "last", "from_unix", "depends")

    def __init__(self, gen: bytes):
        self.gen, self.off = gen, _GEN_LEN
        self.live: list = []
        self.last: dict = {}
        self.from_unix = None
        self.depends: set = set()

    def apply(self, info: dict) -> None:
        last = self.last
        for o, t in (info.get("last_unix_ns") or {}).items():
            if t > last.get(o, 0):
                last[o] = t
        if "live" not in info:       # a line of stop times only (LivePublisher)
            return
        self.live = list(info.get("live") or ())
        self.from_unix = info.get("from_unix")
        self.depends.update(tuple(d) for d in (info.get("depends") or ())
                            if isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d))


def _read_published(path: str, known: "_Published | None") -> "tuple[_Published | None, bool]":
    """The shard's file read on from where ``known`` stopped (from its start when it was
    rewritten since); (None, False) if unreadable. The flag: anything new."""
    try:
        with open(path, "rb") as f:
            gen = f.read(_GEN_LEN)
            if len(gen) < _GEN_LEN or not gen.endswith(b"\n"):
                return known, False          # being created: what was read stays
            pub = known if known is not None and known.gen == gen else _Published(gen)
            f.seek(pub.off)
            data = f.read()
    except OSError:
        return known, False
    end = data.rfind(b"\n") + 1            # a line still being appended is read next time
    if end == 0:
        return pub, pub is not known
    for line in data[:end].splitlines():
        try:
            info = json.loads(line)
        except ValueError:
            continue
        if isinstance(info, dict):
            pub.apply(info)
    pub.off += end
    return pub, True


def read_live(session_dir: str, shard: str, cache: dict) -> tuple[set[str], dict[str, int], float | None,
                                                                list[list[str]]]:
    """The union of the other shards' live requests, the latest time each other request
    stopped being live there (wall-clock ns), the latest start of their rings (wall-clock
    seconds), and the
    [request, request it depends on] pairs they saw. ``cache`` keeps what was read of
    each shard's file (read on from there) and the last answer (returned again, the same
    objects, while no file changed)."""
    d = staging_dir(session_dir)
    pubs = cache.setdefault("shards", {})
    changed = False
    names = [n for n in os.listdir(d) if n != shard and not n.startswith(("_", "."))]
    for name in names:
        pub, new = _read_published(os.path.join(d, name, LIVE), pubs.get(name))
        if pub is None:
            continue
        pubs[name] = pub
        changed |= new
    seen = tuple(n for n in sorted(names) if n in pubs)
    if not changed and cache.get("seen") == seen and "answer" in cache:
        return cache["answer"]
    out: set[str] = set()
    last: dict[str, int] = {}
    latest = None
    depends: set = set()
    for name in seen:
        pub = pubs[name]
        out.update(pub.live)
        if not last:
            last = dict(pub.last)
        else:
            for o, t in pub.last.items():
                if t > last.get(o, 0):
                    last[o] = t
        if pub.from_unix is not None:
            latest = max(latest or 0.0, float(pub.from_unix))
        depends |= pub.depends
    cache["seen"] = seen
    cache["answer"] = (out, last, latest, [list(x) for x in sorted(depends)])
    return cache["answer"]


class TriggerLog:
    """``S/_ring/triggers.jsonl``: append a trigger; poll for the ones not yet handled."""

    def __init__(self, session_dir: str):
        self.session_dir = session_dir
        self.path = os.path.join(staging_dir(session_dir), TRIGGERS)
        self._pos = 0

    def skip_existing(self) -> None:
        """Ignore triggers written before now."""
        self._pos = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def _read_all(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]

    def append(self, reason: str, shard: str | None = None, session_dir: str | None = None, *,
               min_gap_s: float | None = None) -> int | None:
        """Write trigger n+1 (None: skipped, the last one is younger than ``min_gap_s``)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(os.path.join(os.path.dirname(self.path), ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                old = self._read_all()
                now = time.time()
                if min_gap_s and old and now - float(old[-1].get("unix", 0)) < min_gap_s:
                    return None
                n = max([int(t["n"]) for t in old] + [0]) + 1
                while os.path.exists(dump_path(self.session_dir, n)):   # never mix with an older dump
                    n += 1
                trig = {"n": n, "reason": reason, "unix": now, "pid": os.getpid(), "shard": shard}
                out = dump_path(self.session_dir, trig["n"])
                manifest.expect_shards(out, live_shards(self.session_dir), tool="kvtrace ring dump",
                                       session=os.path.abspath(self.session_dir), trigger=trig)
                with open(self.path, "a") as f:
                    f.write(json.dumps(trig) + "\n")
                try:
                    manifest.update(self.session_dir, dumps=[dump_path(self.session_dir, int(t["n"])) for t in old + [trig]])
                except OSError:
                    pass
                return trig["n"]
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def poll(self) -> list[dict]:
        """Triggers appended since the last poll (complete lines only)."""
        try:
            size = os.path.getsize(self.path)
        except OSError:
            return []
        if size <= self._pos:
            return []
        with open(self.path) as f:
            f.seek(self._pos)
            data = f.read()
        end = data.rfind("\n") + 1
        self._pos += len(data[:end].encode())
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]


def _losses(rec) -> dict:
    """What the recorder could not record so far, for the dump's shard.json: postings NIXL ran
    untraced, and rows other than events it could not keep (the whole run's counts: any of
    them may lie in the window). Lost events are left out: a window's seqs jump by design
    (pinned events, the evicted rest), so a seq gap there says nothing."""
    got = rec.lost.as_info()
    out = {}
    if got.get("untraced_postings"):
        out["untraced_postings"] = dict(got["untraced_postings"])
    lost = got.get("lost") or {}
    rows = {k: n for k, n in (lost.get("rows") or {}).items() if k != "events"}
    if rows:
        out["lost"] = {"rows": rows, "reasons": dict(lost.get("reasons") or {})}
    return out


def dump(rec, trig: dict, tail_s: float = 0.0) -> str:
    """Write ``rec``'s ring (a RingRecorder) as its shard of trigger ``trig``'s trace: the
    window up to ``tail_s`` after the trigger (or now, if sooner: the recorder is closing)."""
    out = dump_path(rec.session_dir, int(trig["n"]))
    sdir = os.path.join(out, rec.shard)
    os.makedirs(sdir, exist_ok=True)
    # the same window on every shard: a duration ring's starts its duration before the
    # trigger, a size ring's where the youngest of the session's rings starts; both end the
    # tail after the trigger (what the incident still had in flight), or now if sooner
    mono, unix = time.monotonic_ns(), time.time()
    to_unix = min(float(trig["unix"]) + tail_s, unix)
    if rec.store.window_ns is not None:
        start_unix = float(trig["unix"]) - rec.store.window_ns / 1e9
    else:
        start_unix = max(rec.remote_from_unix or 0.0, rec.from_unix or 0.0)
    start_ns = mono - int((unix - start_unix) * 1e9)
    end_ns = mono - int((unix - to_unix) * 1e9)
    tables, window = rec.store.snapshot(start_ns, end_ns)
    window.update(from_unix=start_unix, to_unix=to_unix, to_t_ns=end_ns, tail_s=tail_s)
    rows = {name: _write_stream(os.path.join(sdir, name + ".arrows"), tables[name], SCHEMAS[name])
            for name in TABLES}
    host = socket.gethostname()
    info = {"pid": os.getpid(), "host": host, "clock": f"monotonic_ns@{host}", "shard": rec.shard,
            # a window, not the whole run: its end is a cut like a crash's (facts after it
            # are unknown), and its start is described by ring.window
            "closed": False,
            "events": rows["events"],
            "ring": {"spec": rec.ring_spec, "trigger": trig, "dumped_unix": time.time(),
                     "window": window}}
    info.update(_losses(rec))
    tmp = os.path.join(sdir, SHARD_INFO + ".tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(sdir, SHARD_INFO))
    manifest.add_shard(out, rec.shard, {"ring": rec.ring_spec})
    man = manifest.read(out)
    if all(os.path.exists(os.path.join(out, s, SHARD_INFO)) for s in man.get("shards", [])):
        manifest.finish(out)
    return out


def _write_stream(path: str, batches, default: pa.Schema) -> int:
    """Write ``batches`` (an iterable: the ring unpacks one at a time) as one Arrow stream,
    in the schema of the first (the wire schema of dictionary columns); rows written."""
    it = iter(batches)
    first = next(it, None)
    schema = first.schema if first is not None else default
    n = 0
    with pa.OSFile(path, "wb") as sink:
        with pa.ipc.new_stream(sink, schema) as writer:
            writer.write_batch(pa.RecordBatch.from_pylist([], schema=schema))
            for b in itertools.chain([first] if first is not None else [], it):
                if b.num_rows:
                    writer.write_batch(b)
                    n += b.num_rows
    return n
