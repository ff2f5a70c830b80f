"""Conflicts: systematic exploration of slot conflicts (the DPOR idea on slots).

For every transfer and every operation touching the same memory inside the
transfer's window (a write or read of the slot, another transfer's move), the eager
schedule runs the move first; this strategy tries the other order. Seed ``s`` flips
conflict pair ``s`` alone for ``s < P`` (P pairs, listed in a fixed order), so seeds
``0..P-1`` cover every single flip; larger seeds flip 2–3 pairs chosen by the seeded
generator.
"""
from __future__ import annotations

from .reorder import ReorderScheduler
from ..conflicts import conflict_index


class ConflictsScheduler(ReorderScheduler):
    """Flip the seed's conflict pair(s) against the eager schedule."""

    name = "conflicts"

    def __init__(self, seed: int = 0, depth: int = 3):
        super().__init__((), seed, depth)

    def start(self, graph, run) -> None:
        pairs = conflict_index(graph).pairs
        if pairs:
            if self.seed < len(pairs):
                chosen = [pairs[self.seed]]
            else:
                import random
                r = random.Random(self.seed)
                chosen = r.sample(pairs, min(len(pairs), r.choice((2, 3))))
            self.flips = frozenset(chosen)
        super().start(graph, run)
