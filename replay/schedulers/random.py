"""Random: a uniformly random enabled operation at every step (seeded)."""
from __future__ import annotations

from .base import Scheduler


class RandomScheduler(Scheduler):
    """Uniform choice among the enabled operations."""

    name = "random"

    def pick(self, cands: list[int]) -> int:
        return self.rng.randrange(len(cands))
