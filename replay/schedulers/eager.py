"""Eager: every transfer's bytes move as soon as it is posted (the source as it was at post)."""
from __future__ import annotations

from .base import Scheduler


class EagerScheduler(Scheduler):
    """Moves first (earliest posted), then program events in recorded-time order."""

    name = "eager"

    def pick(self, cands: list[int]) -> int:
        i = self.move_first(cands)
        return i if i >= 0 else self.program_first(cands)
