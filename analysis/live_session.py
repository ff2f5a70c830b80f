"""The checks over a trace being written, kept open between re-checks (``kvtrace watch``).

:class:`LiveSession` is a TraceSession on a :class:`kvtrace.model.live.LiveModel`: one
DuckDB connection for the whole watch, base tables in memory that only gain the rows
each stream appended, the same derived objects and check SQL as ``check``.
:class:`LiveCheck` is the watcher's ``check``: refresh, run every check, and keep how
long each step took (for the benchmark) and whether the snapshot was cut at a time
frontier (then a finding needs no settling: see live.py).

A re-check runs derived objects and checks as one graph: a check starts as soon as the
objects its SQL names are built (registry.reads), and its findings are handed out as
soon as they are final for this snapshot (every check that could fold them into another
has run: findings.fold_sources), before the rest of the re-check finishes. A refresh
that changed nothing the cut reads keeps every object and finding.
"""
from __future__ import annotations

import functools
import threading
import time

from ..model.live import LiveModel
from .findings import Finding
from .session import TraceSession, _order


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
        early: run derived objects and checks as one graph, checks first as soon as they
            can run, and hand out final findings early (findings' ``on_final``); False:
            every derived object, then every check (the watcher before; the benchmark's
            baseline).
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None,
                 workers: int = 4, early: bool = True, **live):
        self.workers = max(1, int(workers))
        self.early = bool(early)
        self._emitted: set[str] = set()
        self._cost: dict[str, float] = {}      # seconds each statement took when last run
        self._pool = None
        self._local = threading.local()
        self._cursors: list = []
        self.checks_skipped = []
        self.checks_partial = {}
        self._findings = {}
        self._ordering_noted = False
        LiveModel.__init__(self, path, threads=threads, memory_limit=memory_limit, **live)

    def refresh(self, force: bool = False) -> int:
        added = LiveModel.refresh(self, force)
        if self.changed:             # else: the same cut, the same objects, the same findings
            self._findings = {}
            self._emitted = set()
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
                    self.build_python(objs[n])
                    self._built.add(n)
                else:
                    running[self._submit(lambda d: self.create_sql(d, self._cursor()), objs[n])] = n
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

    def findings(self, only: list[str] | None = None, on_final=None) -> list[Finding]:
        """TraceSession.findings, with the statements run at once first (see the class doc).

        Args:
            on_final: with ``early``, called on this thread with each batch of findings
                that is final for this snapshot (folded and regrouped as the result will
                be), while the rest still runs; the result holds them too.
        """
        if self.workers > 1 and not only:
            if self.early:
                self._run_graph(on_final)
            else:
                self._run_checks_after_derive()
        return TraceSession.findings(self, only)

    def _run_checks_after_derive(self) -> None:
        """Every derived object, then every check that can run, ``workers`` at a time."""
        from .findings import catalog, rows_to_findings
        cat = catalog()
        self.derive()
        caps = self.capabilities()
        names = [n for n, c in cat.items() if n not in self._findings and all(caps.get(x) for x in c.needs)]
        futs = {n: self._submit(lambda sql: _Rows(self._cursor(), sql), cat[n].sql) for n in names}
        for n, fut in futs.items():
            self._findings[n] = rows_to_findings(n, fut.result())

    def _run_graph(self, on_final) -> None:
        """Derived objects and checks as one graph, ``workers`` statements at a time,
        the ready one heading the longest chain first; Python builders on this thread as
        soon as they are ready."""
        from concurrent.futures import FIRST_COMPLETED, wait

        from ..model.registry import build_order, registry
        from .findings import catalog, rows_to_findings
        objs, cat = registry(), catalog()
        caps = self.capabilities()
        runnable = [n for n, c in cat.items() if all(caps.get(x) for x in c.needs)]
        needs = _check_needs()
        checks = [n for n in runnable if n not in self._findings]
        order = build_order(objs, sorted(set(build_order(objs, None)).union(*(needs[c] for c in checks))))
        rank = {n: i for i, n in enumerate(order)}
        todo = [n for n in order if n not in self._built]
        running: dict = {}
        level = self._levels(objs, order, checks, needs)
        self._final(on_final, runnable)          # findings kept from an unchanged refresh
        while todo or checks or running:
            built_here = False
            for n in [n for n in todo if objs[n].build is not None]:
                if all(r in self._built for r in objs[n].requires if r in objs):
                    todo.remove(n)
                    self._timed(n, self.build_python, objs[n])
                    self._built.add(n)
                    built_here = True
            ready = [("check", c) for c in checks if needs[c] <= self._built]
            ready += [("obj", n) for n in todo if objs[n].build is None
                      and all(r in self._built for r in objs[n].requires if r in objs)]
            # the longest chain first (its statements' costs in the last re-check): the
            # re-check ends soonest, and each check's findings are out as soon as it ran
            ready.sort(key=lambda k: (-level[k[1]], rank.get(k[1], -1)))
            for kind, n in ready:
                if len(running) >= self.workers:
                    break
                if kind == "check":
                    checks.remove(n)
                    running[self._submit(self._timed, n, lambda sql: _Rows(self._cursor(), sql), cat[n].sql)] = (kind, n)
                else:
                    todo.remove(n)
                    running[self._submit(self._timed, n, lambda d: self.create_sql(d, self._cursor()), objs[n])] = (kind, n)
            if not running:
                if built_here:
                    continue
                raise RuntimeError(f"derived objects and checks cannot be ordered: {todo + checks}")
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                kind, n = running.pop(fut)
                res = fut.result()       # a failed statement raises here
                if kind == "obj":
                    self._built.add(n)
                else:
                    self._findings[n] = rows_to_findings(n, res)
            self._final(on_final, runnable)

    def _levels(self, objs, order: list[str], checks: list[str], needs) -> dict[str, float]:
        """Per object and check, the cost of the longest chain from it to the end of the
        re-check (itself included), at what each statement took when last run (not run
        yet: all alike)."""
        cost = lambda n: self._cost.get(n, 0.001)  # noqa: E731
        level = {c: cost(c) for c in checks}
        after: dict[str, list[str]] = {}
        for c in checks:
            for o in needs[c]:
                after.setdefault(o, []).append(c)
        for n in order:
            for r in objs[n].requires:
                after.setdefault(r, []).append(n)
        for n in reversed(order):            # dependants come later in the order
            level[n] = cost(n) + max((level.get(m, 0.0) for m in after.get(n, ())), default=0.0)
        return level

    def _timed(self, name: str, fn, *args):
        """fn(*args), remembering how long it took (the next re-check's estimate)."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self._cost[name] = time.perf_counter() - t0

    def _final(self, on_final, runnable: list[str]) -> None:
        """Hand ``on_final`` the findings of every check that ran, was not handed out yet,
        and whose fold sources ran too: folded with those and regrouped, they are what
        findings() will return for that check."""
        import dataclasses

        from .findings import fold, fold_sources
        from .unattributed import regroup
        if on_final is None or not _regroup_needs() <= self._built:
            return
        ran = set(self._findings)
        out = []
        for c in runnable:
            src = fold_sources(c) & set(runnable)
            if c in ran and c not in self._emitted and src <= ran:
                group = sorted((dataclasses.replace(f, extra=dict(f.extra)) for g in sorted(src | {c})
                                for f in self._findings[g]), key=_order)   # as findings() folds them
                out += [f for f in fold(group) if f.check == c]
                self._emitted.add(c)
        if out:
            on_final(regroup(self, out))

    def close(self, save: bool = False) -> None:
        """Stop the workers and close (a live trace's derived tables are never saved: it grows)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for c in self._cursors:
            c.close()
        self._cursors = []
        LiveModel.close(self, save=False)


@functools.lru_cache(maxsize=None)
def _check_needs() -> dict[str, frozenset[str]]:
    """Per check, every derived object it needs built (what its SQL names, and what those
    require): from the registry and the SQL files, once."""
    from ..model.registry import build_order, reads, registry
    from .findings import catalog
    objs = registry()
    return {n: frozenset(build_order(objs, sorted(reads(c.sql, objs) & set(objs)))) for n, c in catalog().items()}


@functools.lru_cache(maxsize=None)
def _regroup_needs() -> frozenset[str]:
    """The derived objects unattributed.regroup's query needs (built before findings are handed out)."""
    from ..model.registry import build_order, reads, registry
    from .unattributed import _sql
    objs = registry()
    return frozenset(build_order(objs, sorted(reads(_sql(), objs) & set(objs))))


class LiveCheck:
    """``check(path) -> findings`` for a Watcher, over one LiveSession opened at the first call.

    Args:
        threads: DuckDB threads.
        live: LiveSession's arguments (workers, early, quiet_s, skew_s, now_ns ...).

    Attributes:
        steps: seconds per step of the last call (open or refresh, then derive and checks,
            or with ``early`` both as one step, and when the first findings were handed out).
        consistent: the last snapshot was cut at a time frontier (no settling needed).
        behind: recorded events lay past that frontier (call again even if nothing grew).
        early: the call takes ``on_final`` (see __call__).
    """

    def __init__(self, threads: int | None = None, **live):
        self.threads, self.live = threads, live
        self.session: LiveSession | None = None
        self.steps: dict[str, float] = {}
        self.consistent = False
        self.behind = False
        self.early = bool(live.get("early", True))

    def __call__(self, path: str, on_final=None) -> list[Finding]:
        """The findings of the trace as it is now; ``on_final(findings)``, when given, gets
        the findings that are final before the re-check ends (only where the snapshot is
        cut at a time frontier: elsewhere a finding must settle first)."""
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
        self.consistent = s.frontier is not None or not s.cuts
        self.behind = s.behind
        if not s.early:
            s.derive()
            t2 = time.perf_counter()
            out = s.findings()
            self.steps = {step: t1 - t0, "derive": t2 - t1, "checks": time.perf_counter() - t2}
            return out
        first = []

        def final(fs):
            if fs and not first:
                first.append(time.perf_counter())
            if on_final is not None:
                on_final(fs)
        out = s.findings(on_final=final if self.consistent else None)
        t2 = time.perf_counter()
        self.steps = {step: t1 - t0, "derive+checks": t2 - t1}
        if first:
            self.steps["first findings"] = first[0] - t0
        return out

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
