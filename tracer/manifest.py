"""manifest.json: the launcher's list of shards and what produced the trace.

Several processes may add their shard at once, so updates take an exclusive file lock.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

from .schema import FORMAT_NAME, MANIFEST, SCHEMA_VERSION


@contextlib.contextmanager
def _locked(trace_dir: str):
    os.makedirs(trace_dir, exist_ok=True)
    with open(os.path.join(trace_dir, ".manifest.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read(trace_dir: str) -> dict:
    """The manifest as a dict (a new one if absent)."""
    path = os.path.join(trace_dir, MANIFEST)
    if not os.path.exists(path):
        return {"format": FORMAT_NAME, "version": SCHEMA_VERSION, "shards": [], "complete": False,
                "tool": "kvtrace", "created_unix": time.time()}
    with open(path) as f:
        return json.load(f)


def _write(trace_dir: str, man: dict) -> None:
    tmp = os.path.join(trace_dir, MANIFEST + ".tmp")
    with open(tmp, "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(trace_dir, MANIFEST))


def update(trace_dir: str, **fields) -> dict:
    """Merge ``fields`` into the manifest (creating it)."""
    with _locked(trace_dir):
        man = read(trace_dir)
        man.update(fields)
        _write(trace_dir, man)
        return man


def add_shard(trace_dir: str, shard: str, extra: dict | None = None) -> None:
    """List ``shard`` in the manifest (idempotent) and merge ``extra`` fields."""
    with _locked(trace_dir):
        man = read(trace_dir)
        if shard not in man["shards"]:
            man["shards"].append(shard)
        for k, v in (extra or {}).items():
            man.setdefault(k, v)
        _write(trace_dir, man)


def expect_shards(trace_dir: str, shards: list[str], **fields) -> None:
    """Launcher: list the shards it will start, before they exist (so a lost one is reported)."""
    with _locked(trace_dir):
        man = read(trace_dir)
        for s in shards:
            if s not in man["shards"]:
                man["shards"].append(s)
        man.update(fields)
        _write(trace_dir, man)


def finish(trace_dir: str, **fields) -> None:
    """Launcher: mark the trace complete."""
    update(trace_dir, complete=True, finished_unix=time.time(), **fields)
