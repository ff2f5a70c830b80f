"""Follow a trace while it is written: re-check when its shards grow, report new findings.

:class:`Watcher` is pure logic around two injected things -- what time it is and how to
check a trace -- so tests drive it with a fake clock and no sleeps. A *poll* stats the
stream files of every shard (size and mtime; nothing is read); only when one changed does
it re-check. The default check (live_session.LiveCheck) keeps one model open for the whole
watch and loads only the rows the streams gained. A finding is *new* when no earlier poll
reported one with the same identity (check, agent, request, side): a root cause
whose count grows is not reported twice.

A trace being written is cut at a different point in every process (each flushes its
own buffer), so a snapshot can hold one side of a fact before the other (prefill's
post flushed, decode's alloc of the same page still in decode's buffer). When the check
cuts each snapshot at a time frontier below which every process's facts are written
(its ``consistent`` attribute, see kvtrace/model/live.py), a finding is final at once.
The live check also hands out each check's findings as soon as they are final, while the
rest of the re-check still runs: ``poll(emit=...)`` passes them on at once.
Otherwise (clocks of several hosts, an injected check) a finding is reported once it has
*settled*: it is still found ``settle_s`` after the snapshot that first showed it (every
recorder has flushed since: the flush interval is 0.2 s). A finding that disappears when
the other side's facts land was an artefact of the cut and is never printed.
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
    """What makes two findings of successive polls the same root cause. Not the pool: a
    finding names the first of the pools it covers, and the pools grow with the trace (one
    transfer of a request landed: kv; all four: aux+index_k+kv+state)."""
    return (f.check, f.agent, f.request, f.extra.get("side"))


def run_checks(path: str) -> list[Finding]:
    """All checks over the trace as it is now, opened afresh (a stateless ``check``)."""
    from .session import TraceSession
    with TraceSession(path) as s:
        return s.findings()


def first_change(old: tuple, new: tuple) -> float | None:
    """The earliest mtime (Unix seconds) among the stream files that changed from stamp
    ``old`` to ``new``: the earliest flush a check of ``new`` sees first (None: none)."""
    before = {(d, t): (size, m) for d, t, size, m in old}
    times = [m for d, t, size, m in new if t and before.get((d, t)) != (size, m)]
    return min(times) / 1e9 if times else None


@dataclasses.dataclass
class Report:
    """One new finding and when it was seen."""
    finding: Finding
    seen_at: float          #: the watcher's clock when the poll that reported it ended
    landed_at: float        #: the watcher's clock when a poll first saw the files it was found in
    flushed_at: float | None = None
    """Unix time of the earliest flush the check that first found it saw first (its facts
    were flushed at or after this)"""


class Watcher:
    """Polls a trace; ``poll()`` returns the new findings since the last poll.

    Args:
        path: the trace directory (it may not exist yet).
        clock: returns the current time in seconds (injected for tests).
        check: runs the checks over a trace path (injected for tests; default: a
            live_session.LiveCheck). When it has a true ``consistent`` attribute after a
            call, the findings of that call need no settling.
        settle_s: how long a finding of an inconsistent snapshot must persist.
    """

    def __init__(self, path: str, clock: Callable[[], float], check: Callable[[str], list[Finding]] | None = None,
                 settle_s: float = 0.5):
        if check is None:
            from .live_session import LiveCheck
            check = LiveCheck()
        self.path = path
        self.clock = clock
        self.check = check
        self.settle_s = settle_s
        self._stamp: tuple = ()
        self._seen: set = set()
        self._pending: dict = {}    # identity -> (finding, snapshot that showed it, flushed_at)
        self._consistent = False
        self.checks_run = 0
        """how many times the checks ran (only when the streams grew)"""

    def poll(self, emit: Callable[[Report], None] | None = None) -> list[Report]:
        """Re-check if the trace grew; return the findings that settled since the last poll.

        Args:
            emit: called with each new finding the check hands out as final while it
                still runs (a check with a true ``early`` attribute takes ``on_final``,
                see live_session.LiveCheck), so it can be printed before the re-check
                ends; those are not in the returned list.
        """
        st = stamp(self.path)
        # behind: the last check left recorded events past its time frontier, which
        # moves with the clock: check again even if nothing was written
        grew = bool(st) and (st != self._stamp or bool(getattr(self.check, "behind", False)))
        if grew:
            landed = self.clock()
            flushed = first_change(self._stamp, st)

            def final(findings: list[Finding]) -> None:
                for f in findings:
                    key = identity(f)
                    if key not in self._seen:
                        self._seen.add(key)
                        self._pending.pop(key, None)
                        emit(Report(f, self.clock(), landed, flushed))
            try:
                if emit is not None and getattr(self.check, "early", False):
                    findings = self.check(self.path, on_final=final)
                else:
                    findings = self.check(self.path)
            except TraceError:   # a shard still being created (no manifest or stream yet): next poll
                return []
            self._stamp = st
            self.checks_run += 1
            self._consistent = bool(getattr(self.check, "consistent", False))
            current = {}
            for f in findings:
                current.setdefault(identity(f), f)
            for key in [k for k in self._pending if k not in current]:
                del self._pending[key]           # gone once the other side's facts landed
            for key, f in current.items():
                if key in self._seen:
                    continue
                first = self._pending.get(key)
                self._pending[key] = (f, first[1] if first else landed, first[2] if first else flushed)
        now = self.clock()
        settle = 0.0 if self._consistent else self.settle_s
        out = []
        for key, (f, landed, flushed) in list(self._pending.items()):
            if now - landed >= settle:
                del self._pending[key]
                self._seen.add(key)
                out.append(Report(f, now, landed, flushed))
        return out

    def complete(self) -> bool:
        """The trace's manifest says its recording ended."""
        import json
        try:
            with open(os.path.join(self.path, MANIFEST)) as f:
                return bool(json.load(f).get("complete"))
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        """Close the check's open model, if it keeps one."""
        close = getattr(self.check, "close", None)
        if close is not None:
            close()
