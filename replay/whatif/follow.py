"""Follow: replay the fixed program in the order a run of the recorded one took.

The fixed graph has the same operation ids, so "the same schedule under the fix" is:
at every step run the enabled operation that came earliest in the reference run (one
the fix now holds back simply runs once it may).
"""
from __future__ import annotations

from ..schedulers.base import Scheduler


class FollowScheduler(Scheduler):
    """Picks the candidate that ran earliest in ``order``."""

    name = "follow"

    def __init__(self, order: list[int]):
        super().__init__(0)
        self.rank = {op: i for i, op in enumerate(order)}

    def pick(self, cands: list[int]) -> int:
        rank, big = self.rank, len(self.rank)
        return min(range(len(cands)), key=lambda i: (rank.get(cands[i], big), i))
