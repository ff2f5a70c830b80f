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


LIVE = "live.json"


def publish_live(session_dir: str, shard: str, requests: list[str], last_unix: dict[str, float],
                 from_unix: float | None, depends: list[list[str]] | None = None) -> None:
    """Write ``S/_ring/<shard>/live.json``: the requests this shard keeps live, when the
    others stopped being live, when its ring's oldest chunk starts (wall clock, comparable
    across hosts), and the [request, request it depends on] pairs it saw (RingStore.depends)."""
    d = os.path.join(staging_dir(session_dir), shard)
    tmp = os.path.join(d, LIVE + ".tmp")
    # json.dumps, not json.dump: the same text from the C encoder in one write (json.dump
    # encodes in Python, one write per token: most of this call's CPU for ~400 requests)
    text = json.dumps({"live": requests, "last_unix": last_unix, "from_unix": from_unix, "depends": depends or []})
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(d, LIVE))


def read_live(session_dir: str, shard: str, cache: dict) -> tuple[set[str], dict[str, float], float | None,
                                                                list[list[str]]]:
    """The union of the other shards' live requests (re-read only when a file changed),
    the latest time each other request stopped being live there, the latest start of
    their rings (wall clock), and the [request, request it depends on] pairs they saw."""
    d = staging_dir(session_dir)
    out: set[str] = set()
    last: dict[str, float] = {}
    latest = None
    depends: list[list[str]] = []
    for name in os.listdir(d):
        if name == shard or name.startswith(("_", ".")):
            continue
        p = os.path.join(d, name, LIVE)
        try:
            mtime = os.stat(p).st_mtime_ns
        except OSError:
            continue
        if cache.get(name, (None,))[0] != mtime:
            try:
                with open(p) as f:
                    cache[name] = (mtime, json.load(f))
            except (OSError, ValueError):
                continue
        info = cache[name][1]
        out.update(info.get("live") or ())
        for o, t in (info.get("last_unix") or {}).items():
            if t > last.get(o, 0.0):
                last[o] = t
        if info.get("from_unix") is not None:
            latest = max(latest or 0.0, float(info["from_unix"]))
        depends += [d for d in (info.get("depends") or ())
                    if isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d)]
    return out, last, latest, depends


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
