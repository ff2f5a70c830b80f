"""Explore: replay many seeds of one strategy on the symbolic executor and summarize."""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..errors import UsageError
from .api import make_scheduler, run_graph
from .graph import Graph
from .symbolic import SymbolicExecutor


@dataclasses.dataclass
class Exploration:
    """What a sweep over seeds found."""
    scheduler: str
    runs: int = 0
    failing: list[int] = dataclasses.field(default_factory=list)
    first_schedule: str | None = None
    first_lines: list[str] = dataclasses.field(default_factory=list)
    distinct_failures: int = 0

    @property
    def rate(self) -> float:
        return len(self.failing) / self.runs if self.runs else 0.0


def parse_seeds(text: str) -> range:
    """'0:1000' (half-open), '7' (one seed) → range."""
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            r = range(int(a or 0), int(b))
        else:
            r = range(int(text), int(text) + 1)
    except ValueError:
        raise UsageError(f"--seeds {text!r}: expected START:STOP or N") from None
    if len(r) == 0:
        raise UsageError(f"--seeds {text!r}: empty range")
    return r


def explore(graph: Graph, scheduler: str, seeds: range, depth: int = 3, stop_on_first: bool = False,
            chunks: int = 1, fault: str | None = None,
            progress: Callable[[int, int], None] | None = None) -> Exploration:
    """Run ``scheduler`` for every seed; ``progress(done, failing)`` after each run."""
    ex = Exploration(scheduler)
    sigs = set()
    for seed in seeds:
        o = run_graph(graph, make_scheduler(scheduler, seed, depth), SymbolicExecutor(), chunks, fault,
                      compare_recorded=False)
        ex.runs += 1
        if o.verdict.failed:
            ex.failing.append(seed)
            sigs.add(o.verdict.signature())
            if ex.first_schedule is None:
                ex.first_schedule = o.schedule
                ex.first_lines = o.verdict.lines(graph)
        if progress:
            progress(ex.runs, len(ex.failing))
        if stop_on_first and ex.failing:
            break
    ex.distinct_failures = len(sigs)
    return ex
