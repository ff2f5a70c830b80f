"""Follow a trace while it is written: re-check when its shards grow, report new findings.

:class:`Watcher` is pure logic around two injected things -- what time it is and how to
check a trace -- so tests drive it with a fake clock and no sleeps. A *poll* stats the
stream files of every shard (size and mtime; nothing is read); only when one changed does
it re-open the trace (the ``_index/`` cache is rebuilt from the changed streams) and re-run
the checks. A finding is *new* when no earlier poll reported one with the same identity
(check, agent, request, pool, side): a root cause whose count grows is not reported twice.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

from ..errors import TraceError
from ..tracer.schema import MANIFEST, TABLES
from .findings import Finding


def stamp(path: str) -> tuple:
    """(shard, table, size, mtime_ns) of every stream file, plus the manifest's mtime."""
    out = []
    try:
        names = sorted(d for d in os.listdir(path) if not d.startswith(("_", ".")))
    except OSError:
        return ()
    for d in names:
        sdir = os.path.join(path, d)
        if not os.path.isdir(sdir):
            continue
        for t in TABLES:
            try:
                st = os.stat(os.path.join(sdir, t + ".arrows"))
            except OSError:
                continue
            out.append((d, t, st.st_size, st.st_mtime_ns))
    try:
        out.append((MANIFEST, "", 0, os.stat(os.path.join(path, MANIFEST)).st_mtime_ns))
    except OSError:
        pass
    return tuple(out)


def identity(f: Finding) -> tuple:
    """What makes two findings of successive polls the same root cause."""
    return (f.check, f.agent, f.request, f.pool, f.extra.get("side"))


def run_checks(path: str) -> list[Finding]:
    """All checks over the trace as it is now (the default ``check`` of a Watcher)."""
    from .session import TraceSession
    with TraceSession(path) as s:
        return s.findings()


@dataclasses.dataclass
class Report:
    """One new finding and when it was seen."""
    finding: Finding
    seen_at: float          #: the watcher's clock when the poll that found it ended
    landed_at: float        #: the watcher's clock when the poll saw the grown files


class Watcher:
    """Polls a trace; ``poll()`` returns the new findings since the last poll.

    Args:
        path: the trace directory (it may not exist yet).
        clock: returns the current time in seconds (injected for tests).
        check: runs the checks over a trace path (injected for tests; default run_checks).
    """

    def __init__(self, path: str, clock: Callable[[], float], check: Callable[[str], list[Finding]] = run_checks):
        self.path = path
        self.clock = clock
        self.check = check
        self._stamp: tuple = ()
        self._seen: set = set()
        self.checks_run = 0
        """how many times the checks ran (only when the streams grew)"""

    def poll(self) -> list[Report]:
        st = stamp(self.path)
        if not st or st == self._stamp:
            return []
        landed = self.clock()
        try:
            findings = self.check(self.path)
        except TraceError:   # a shard still being created (no manifest or stream yet): next poll
            return []
        self._stamp = st
        self.checks_run += 1
        now = self.clock()
        out = []
        for f in findings:
            key = identity(f)
            if key not in self._seen:
                self._seen.add(key)
                out.append(Report(f, now, landed))
        return out

    def complete(self) -> bool:
        """The trace's manifest says its recording ended."""
        import json
        try:
            with open(os.path.join(self.path, MANIFEST)) as f:
                return bool(json.load(f).get("complete"))
        except (OSError, ValueError):
            return False
