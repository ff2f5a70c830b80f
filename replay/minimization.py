"""Minimize: shrink a failing schedule to the fewest reorderings that still fail.

A *reordering* (m, o) says "the move m ran after o", where o conflicts with m (touches
the same cell, one of them writing) and ran after m's post — the eager schedule would
have moved m first. The failing run's reorderings are replayed with the ``reorder``
scheduler (eager plus exactly those reorderings) and shrunk, delta-debugging style,
then one by one until removing any single reordering makes the failure disappear
(1-minimal).
"""
from __future__ import annotations

import dataclasses

from .api import run_graph
from .conflicts import conflict_index
from .engine import execute
from .schedule import DecisionScheduler
from .schedulers.reorder import ReorderScheduler
from .symbolic import SymbolicExecutor
from .verify import verify


@dataclasses.dataclass
class Minimized:
    """The smallest failing set of reorderings found, and its exact schedule string."""
    flips: list[tuple[int, int]]
    schedule: str
    runs: int
    original: int                   # reorderings in the failing schedule

    def lines(self, graph) -> list[str]:
        """Which transfers moved past which events, in words."""
        return [f"{graph.describe(m)} moved past {graph.describe(o)}" for m, o in self.flips]


def reorderings(graph, order: list[int]) -> list[tuple[int, int]]:
    """Reorderings (m, o) of an executed order, among the graph's conflict pairs."""
    pos = {op: i for i, op in enumerate(order)}
    out = []
    for m, o in conflict_index(graph).pairs:
        post = graph.transfers[graph.move_xfer[m - graph.n_prog]].post
        if pos[post] < pos[o] < pos[m]:
            out.append((m, o))
    return out


def fails(graph, flips, chunks: int = 1, fault=None) -> bool:
    """Does the reorder schedule with exactly ``flips`` corrupt a read?"""
    ex = SymbolicExecutor()
    res = execute(graph, ReorderScheduler(flips), ex)
    return verify(graph, res, ex, compare_recorded=False).failed


def minimize(graph, decisions: list[int], chunks: int = 1, fault=None) -> Minimized | None:
    """Shrink the failing schedule ``decisions``; None when it does not fail at all.

    Raises:
        ValueError: the failure cannot be expressed as reorderings of conflicting events.
    """
    ex = SymbolicExecutor()
    res = execute(graph, DecisionScheduler(decisions), ex)
    if not verify(graph, res, ex, compare_recorded=False).failed:
        return None
    cur = reorderings(graph, res.order)
    original, runs = len(cur), 1
    if not fails(graph, cur):
        raise ValueError("the failure does not reproduce from its slot reorderings alone")
    n = 2
    while len(cur) >= 2:           # delta debugging: drop whole chunks while it still fails
        size = -(-len(cur) // n)
        for i in range(0, len(cur), size):
            trial = cur[:i] + cur[i + size:]
            runs += 1
            if fails(graph, trial):
                cur, n = trial, max(n - 1, 2)
                break
        else:
            if n >= len(cur):
                break
            n = min(len(cur), 2 * n)
    changed = True
    while changed:                 # then one by one until 1-minimal
        changed = False
        for f in list(cur):
            trial = [x for x in cur if x != f]
            runs += 1
            if fails(graph, trial):
                cur, changed = trial, True
    o = run_graph(graph, ReorderScheduler(cur), SymbolicExecutor(), chunks, fault)
    return Minimized(sorted(cur), o.schedule, runs + 1, original)
