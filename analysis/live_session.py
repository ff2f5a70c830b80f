"""The checks over a trace being written, kept open between re-checks (``kvtrace watch``).

:class:`LiveSession` is a TraceSession on a :class:`kvtrace.model.live.LiveModel`: one
DuckDB connection for the whole watch, base tables in memory that only gain the rows
each stream appended, the same derived objects and check SQL as ``check``.
:class:`LiveCheck` is the watcher's ``check``: refresh, run every check, and keep how
long each step took (for the benchmark) and whether the snapshot was cut at a time
frontier (then a finding needs no settling: see live.py).
"""
from __future__ import annotations

import time

from ..model.live import LiveModel
from .findings import Finding
from .session import TraceSession


class LiveSession(TraceSession, LiveModel):
    """A TraceSession that :meth:`refresh` brings up to date (see LiveModel for the args)."""

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None, **live):
        LiveModel.__init__(self, path, threads=threads, memory_limit=memory_limit, **live)
        self.checks_skipped = []
        self._findings = {}
        self._ordering_noted = False

    def refresh(self) -> int:
        added = LiveModel.refresh(self)
        self._findings = {}
        self._ordering_noted = False
        return added


class LiveCheck:
    """``check(path) -> findings`` for a Watcher, over one LiveSession opened at the first call.

    Attributes:
        steps: seconds per step of the last call (open or refresh, derive, checks).
        consistent: the last snapshot was cut at a time frontier (no settling needed).
        behind: recorded events lay past that frontier (call again even if nothing grew).
    """

    def __init__(self, threads: int | None = None, **live):
        self.threads, self.live = threads, live
        self.session: LiveSession | None = None
        self.steps: dict[str, float] = {}
        self.consistent = False
        self.behind = False

    def __call__(self, path: str) -> list[Finding]:
        t0 = time.perf_counter()
        if self.session is None or self.session.path != path:
            self.close()
            self.session = LiveSession(path, threads=self.threads, **self.live)
            step = "open"
        else:
            self.session.refresh()
            step = "refresh"
        t1 = time.perf_counter()
        s = self.session
        s.derive()
        t2 = time.perf_counter()
        out = s.findings()
        t3 = time.perf_counter()
        self.steps = {step: t1 - t0, "derive": t2 - t1, "checks": t3 - t2}
        self.consistent = s.frontier is not None or not s.cuts
        self.behind = s.behind
        return out

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
