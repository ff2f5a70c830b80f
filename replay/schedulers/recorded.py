"""Recorded: program events at their recorded times; each transfer's bytes at post time
plus its measured duration (NIXL telemetry in the ``xfer_done`` detail), else at post."""
from __future__ import annotations

from .base import Scheduler


class RecordedScheduler(Scheduler):
    """Earliest (recorded or estimated) time first; ties: op id."""

    name = "recorded"

    def pick(self, cands: list[int]) -> int:
        g = self.graph
        tns = g.col["t_ns"]

        def when(op: int) -> tuple:
            if op < g.n_prog:
                return (tns[op] or 0, 1, op)
            t = g.transfers[g.move_xfer[op - g.n_prog]]
            # ties with the event at the same instant: the data lands first (0 < 1)
            return (t.t_post + (t.duration_ns or 0), 0, op)

        return min(range(len(cands)), key=lambda j: when(cands[j]))
