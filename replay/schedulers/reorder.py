"""Reorder: eager, except for a given set of reorderings "move m runs after op o".

The building block of the ``conflicts`` strategy and of ``minimize``. Each pair (m, o)
in ``flips`` holds m back until o has run (hard). Any other operation that conflicts
with a move still pending keeps its eager place after it (soft), so exactly the
requested reorderings happen; when the constraints contradict program order the soft
ones give way first, then the hard ones, so a run never deadlocks.
"""
from __future__ import annotations

from .base import Scheduler
from ..conflicts import conflict_index


class ReorderScheduler(Scheduler):
    """Eager plus ``flips`` — a collection of (move op, op) pairs."""

    name = "reorder"

    def __init__(self, flips=(), seed: int = 0, depth: int = 3):
        super().__init__(seed, depth)
        self.flips = frozenset(tuple(f) for f in flips)

    def start(self, graph, run) -> None:
        super().start(graph, run)
        self.after: dict[int, list[int]] = {}
        for m, o in self.flips:
            self.after.setdefault(m, []).append(o)
        self.conf = conflict_index(graph).by_op
        # ops whose place can depend on the flips; any other candidate is plain eager
        self.relevant = frozenset(self.after) | frozenset(self.conf)

    def _hard(self, op: int) -> bool:
        done = self.run.done
        return any(not done[o] for o in self.after.get(op, ()))

    def _soft(self, op: int) -> bool:
        g, done, flips = self.graph, self.run.done, self.flips
        for m in self.conf.get(op, ()):
            if m == op or done[m] or not done[g.transfers[g.move_xfer[m - g.n_prog]].post]:
                continue
            if (m, op) in flips or (op >= g.n_prog and m > op):
                continue
            return True
        return False

    def _eager(self, cands: list[int], idx: list[int]) -> int:
        sub = [cands[i] for i in idx]
        j = self.move_first(sub)
        if j < 0:
            j = self.program_first(sub)
        return idx[j]

    def pick(self, cands: list[int]) -> int:
        rel = self.relevant
        if not any(op in rel for op in cands):
            j = self.move_first(cands)
            return j if j >= 0 else self.program_first(cands)
        free = [i for i, op in enumerate(cands) if not self._hard(op)]
        allowed = [i for i in free if not self._soft(cands[i])]
        return self._eager(cands, allowed or free or list(range(len(cands))))
