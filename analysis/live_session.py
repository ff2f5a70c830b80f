"""The checks over a trace being written, kept open between re-checks (``kvtrace watch``).

:class:`LiveSession` is a TraceSession on a :class:`kvtrace.model.live.LiveModel`: one
DuckDB connection for the whole watch, base tables in memory that only gain the rows
each stream appended, the same derived objects and check SQL as ``check``.
:class:`LiveCheck` is the watcher's ``check``: refresh, run every check, and keep how
long each step took (for the benchmark) and whether the snapshot was cut at a time
frontier (then a finding needs no settling: see live.py).
"""
from __future__ import annotations

import threading
import time

from ..model.live import LiveModel
from .findings import Finding
from .session import TraceSession


class _Rows:
    """A check's result rows as rows_to_findings reads them (``to_pylist``), fetched with
    execute(): the relation API (``.sql()``) binds every statement twice."""

    def __init__(self, cursor, sql: str):
        cur = cursor.execute(sql)
        names = [d[0] for d in cur.description]
        self.rows = [dict(zip(names, r)) for r in cur.fetchall()]

    def to_pylist(self) -> list[dict]:
        return self.rows


class LiveSession(TraceSession, LiveModel):
    """A TraceSession that :meth:`refresh` brings up to date (see LiveModel for the args).

    A re-check on a small trace is dominated by the fixed cost of each of ~50 statements
    (the 28 derived objects, the 19 checks), not by the rows; so independent statements
    run at once, each on its own cursor of the connection, ``workers`` at a time: a
    derived object as soon as what it requires is built, the checks once all are.

    Args:
        workers: statements run at once (1: one after another, as ``check`` does).
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None,
                 workers: int = 4, **live):
        self.workers = max(1, int(workers))
        self._pool = None
        self._local = threading.local()
        self._cursors: list = []
        self.checks_skipped = []
        self._findings = {}
        self._ordering_noted = False
        LiveModel.__init__(self, path, threads=threads, memory_limit=memory_limit, **live)

    def refresh(self) -> int:
        added = LiveModel.refresh(self)
        self._findings = {}
        self._ordering_noted = False
        return added

    # ------------------------------------------------------------------ running at once
    def _cursor(self):
        """This worker thread's cursor (each thread its own: a connection runs one call at a time)."""
        c = getattr(self._local, "cursor", None)
        if c is None:
            c = self._local.cursor = self.con.cursor()
            self._cursors.append(c)
        return c

    def _submit(self, fn, *args):
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="kvtrace-watch")
        return self._pool.submit(fn, *args)

    def derive(self, names=None) -> None:
        """As TraceModel.derive, with the SQL objects whose requirements are built run at
        once on the workers; Python builders run here, on the model's own connection."""
        from concurrent.futures import FIRST_COMPLETED, wait

        from ..model.registry import BASE, build_order, registry
        objs = registry()
        todo = [n for n in build_order(objs, names) if n not in self._built]
        if self.workers == 1 or len(todo) < 2:
            return LiveModel.derive(self, names)
        running: dict = {}
        while todo or running:
            ready = [n for n in todo if all(r in BASE or r in self._built for r in objs[n].requires)]
            for n in ready:
                todo.remove(n)
                if objs[n].build is not None:
                    objs[n].build(self)
                    self._built.add(n)
                else:
                    running[self._submit(lambda sql: self._cursor().execute(sql), objs[n].sql)] = n
            if any(objs[n].build is not None and all(r in BASE or r in self._built for r in objs[n].requires)
                   for n in todo):
                continue             # a builder became ready: run it before waiting
            if running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    fut.result()     # a failed statement raises here
                    self._built.add(running.pop(fut))
            elif todo and not ready:
                raise RuntimeError(f"derived objects cannot be ordered: {todo}")

    def findings(self, only: list[str] | None = None) -> list[Finding]:
        """TraceSession.findings, with the checks that can run computed at once first."""
        from .findings import catalog, rows_to_findings
        cat = catalog()
        if self.workers > 1 and not only:
            self.derive()
            caps = self.capabilities()
            names = [n for n, c in cat.items() if n not in self._findings and all(caps.get(x) for x in c.needs)]
            futs = {n: self._submit(lambda sql: _Rows(self._cursor(), sql), cat[n].sql) for n in names}
            for n, fut in futs.items():
                self._findings[n] = rows_to_findings(n, fut.result())
        return TraceSession.findings(self, only)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for c in self._cursors:
            c.close()
        self._cursors = []
        LiveModel.close(self)


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
