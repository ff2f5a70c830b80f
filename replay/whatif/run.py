"""Replay and explore a recorded program and its fixed twin side by side."""
from __future__ import annotations

import dataclasses

from . import Fixed, apply
from .follow import FollowScheduler


@dataclasses.dataclass
class WhatIfReplay:
    """One schedule of the recorded program, the same order under the fix, and the fix."""
    before: object                  # api.Outcome
    after: object                   # api.Outcome
    fix: Fixed

    @property
    def forced(self) -> int:
        """Operations of the fixed run that had to run against a wait never met (the fix
        made the program wait for something that comes only later: a deadlock)."""
        return len(self.after.result.forced) - len(self.before.result.forced)


def replay_whatif(path: str, spec, scheduler: str = "recorded", seed: int = 0, depth: int = 3,
                  executor: str = "symbolic", device: str = "cpu", schedule: str | None = None,
                  fault: str | None = None, chunks: int = 1, graph=None,
                  observe_writes: bool = False) -> WhatIfReplay:
    """Replay ``path`` under a scheduler and seed, then the program re-derived under the
    what-if ``spec`` under the same scheduler and seed (as ``explore --what-if`` runs it);
    with a schedule string the fixed program follows that run's order instead."""
    from ..api import make_executor, make_scheduler, replay, run_graph
    before = replay(path, scheduler, seed, depth, executor, device, schedule, fault, chunks, graph=graph)
    fix = apply(before.graph, spec)
    sch = FollowScheduler(before.result.order) if schedule else make_scheduler(scheduler, seed, depth)
    after = run_graph(fix.graph, sch, make_executor(executor, device), chunks, fault, compare_recorded=False,
                      observe_writes=observe_writes)
    after.scheduler, after.seed = before.scheduler, before.seed
    return WhatIfReplay(before, after, fix)


@dataclasses.dataclass
class WhatIfExploration:
    before: object                  # exploration.Exploration of the recorded program
    after: object                   # the same seeds against the fixed program
    fix: Fixed


def explore_whatif(graph, spec, scheduler: str, seeds: range, depth: int = 3, chunks: int = 1,
                   fault: str | None = None, progress=None) -> WhatIfExploration:
    """Explore the same seeds of ``scheduler`` on the recorded program and on the fixed one."""
    from ..exploration import explore
    fix = apply(graph, spec)
    n = len(seeds)
    before = explore(graph, scheduler, seeds, depth, False, chunks, fault,
                     None if progress is None else (lambda d, f: progress(d, 2 * n, f, 0)))
    after = explore(fix.graph, scheduler, seeds, depth, False, chunks, fault,
                    None if progress is None else (lambda d, f: progress(n + d, 2 * n, len(before.failing), f)))
    return WhatIfExploration(before, after, fix)
