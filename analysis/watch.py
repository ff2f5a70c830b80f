"""Follow a trace while it is written: re-check when its shards grow, report new findings.

:class:`Watcher` is pure logic around two injected things -- what time it is and how to
check a trace -- so tests drive it with a fake clock and no sleeps. A *poll* stats the
stream files of every shard (size and mtime; nothing is read); only when one changed does
it re-open the trace (the ``_index/`` cache is rebuilt from the changed streams) and re-run
the checks. A finding is *new* when no earlier poll reported one with the same identity
(check, agent, request, pool, side): a root cause whose count grows is not reported twice.

A trace being written is cut at a different point in every process (each flushes its
own buffer), so a check can briefly see one side of a fact before the other (prefill's
post flushed, decode's alloc of the same page still in decode's buffer). A finding is
therefore reported once it has *settled*: it is still found ``settle_s`` after it was
first seen (every recorder has flushed since: the flush interval is 0.1-0.2 s), or the
trace did not change meanwhile. A finding that disappears when the other side's facts
land was an artefact of the cut and is never printed.
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
    seen_at: float          #: the watcher's clock when the poll that reported it ended
    landed_at: float        #: the watcher's clock when a poll first saw the files it was found in


class Watcher:
    """Polls a trace; ``poll()`` returns the new findings since the last poll.

    Args:
        path: the trace directory (it may not exist yet).
        clock: returns the current time in seconds (injected for tests).
        check: runs the checks over a trace path (injected for tests; default run_checks).
    """

    def __init__(self, path: str, clock: Callable[[], float], check: Callable[[str], list[Finding]] = run_checks,
                 settle_s: float = 0.5):
        self.path = path
        self.clock = clock
        self.check = check
        self.settle_s = settle_s
        self._stamp: tuple = ()
        self._seen: set = set()
        self._pending: dict = {}    # identity -> (finding, first seen, when its facts were seen)
        self.checks_run = 0
        """how many times the checks ran (only when the streams grew)"""

    def poll(self) -> list[Report]:
        """Re-check if the trace grew; return the findings that settled since the last poll."""
        st = stamp(self.path)
        grew = bool(st) and st != self._stamp
        if grew:
            landed = self.clock()
            try:
                findings = self.check(self.path)
            except TraceError:   # a shard still being created (no manifest or stream yet): next poll
                return []
            self._stamp = st
            self.checks_run += 1
            now = self.clock()
            current = {}
            for f in findings:
                current.setdefault(identity(f), f)
            for key in [k for k in self._pending if k not in current]:
                del self._pending[key]           # gone once the other side's facts landed
            for key, f in current.items():
                if key in self._seen:
                    continue
                first = self._pending.get(key)
                self._pending[key] = (f, first[1] if first else now, first[2] if first else landed)
        now = self.clock()
        out = []
        for key, (f, first, landed) in list(self._pending.items()):
            if now - first >= self.settle_s:
                del self._pending[key]
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
