"""Lazy: every transfer's bytes move at the latest legal point.

Program events run while any can; a move runs only when nothing else can — when a
completion observation waits for it, or at the end for transfers never observed.
"""
from __future__ import annotations

from .base import Scheduler


class LazyScheduler(Scheduler):
    """Program events first (recorded-time order); then the move whose recorded
    observation comes first (never-observed transfers last)."""

    name = "lazy"

    def pick(self, cands: list[int]) -> int:
        i = self.program_first(cands)
        if i >= 0:
            return i
        g = self.graph
        inf = float("inf")
        return min(range(len(cands)), key=lambda j: (
            g.transfers[g.move_xfer[cands[j] - g.n_prog]].deadline_t or inf, cands[j]))
