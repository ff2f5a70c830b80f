"""PCT — probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte,
ASPLOS 2010).

Every program thread and every move is a "thread" with a random priority above
``depth``; at ``depth - 1`` distinct random steps among the first ``k`` (an estimate of the run's
length: visible program events plus moves) the running thread drops to priority
``i < depth``. The highest-priority enabled operation always runs. A bug of depth d is
found with probability at least 1 / (n * k**(d-1)) per run (n threads).
"""
from __future__ import annotations

from .base import Scheduler


class PctScheduler(Scheduler):
    """PCT with ``depth`` (d) priority change points."""

    name = "pct"

    def start(self, graph, run) -> None:
        super().start(graph, run)
        g = graph
        n_threads = len(g.threads) + len(g.move_xfer)
        d = max(1, self.depth)
        self.prio = [d + self.rng.random() for _ in range(n_threads)]
        visible = sum(1 for k in g.col["kind"] if k in ("write", "read", "xfer_post"))
        k = max(1, visible + len(g.move_xfer))
        # d-1 distinct steps (drawing each independently lets two land on one step and
        # silently lose a change point, breaking the bound above); the i-th lowers to d-1-i
        steps = self.rng.sample(range(1, k + 1), min(d - 1, k))
        self.change = dict(zip(steps, range(d - 1, 0, -1)))
        self.steps = 0
        # thread of every op: program threads first, then one per move
        self.tid = g.thread_of + list(range(len(g.threads), n_threads))

    def pick(self, cands: list[int]) -> int:
        self.steps += 1
        prio, tid = self.prio, self.tid
        best, best_p = 0, -1.0
        for j, op in enumerate(cands):
            p = prio[tid[op]]
            if p > best_p:
                best, best_p = j, p
        lowered = self.change.get(self.steps)
        if lowered is not None:
            prio[tid[cands[best]]] = float(lowered)
        return best
