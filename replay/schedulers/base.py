"""The scheduler interface: a pure oracle over a run (shuttle's ``Scheduler`` idea).

The engine calls ``start(graph, run)`` once, then ``pick(candidates)`` whenever more
than one operation is enabled; ``candidates`` are op ids in a deterministic order and
``pick`` returns an index into it. A scheduler may read the run's public state
(``run.done`` — a bytearray, 1 for executed ops — and ``run.step``) but never changes
it. Every random number comes from ``self.rng``, seeded by the scheduler's seed, so a
run is a pure function of (trace, scheduler, seed).
"""
from __future__ import annotations

import random as _random


class Scheduler:
    """Base class: deterministic strategies override ``pick``."""

    #: registry name (``--scheduler NAME``)
    name = "base"

    def __init__(self, seed: int = 0, depth: int = 3):
        self.seed = seed
        self.depth = depth
        self.rng = _random.Random(seed)
        self.graph = None
        self.run = None

    def start(self, graph, run) -> None:
        """A new execution of ``graph`` begins; ``run`` exposes ``done`` and ``step``."""
        self.graph, self.run = graph, run
        self.rng = _random.Random(self.seed)

    def pick(self, cands: list[int]) -> int:
        """Index into ``cands`` of the operation to run next."""
        raise NotImplementedError

    def rand(self) -> float:
        """A random number in [0, 1) for anything else that must vary with the seed."""
        return self.rng.random()

    # helpers shared by strategies ------------------------------------------------------
    def program_first(self, cands: list[int]) -> int:
        """The program op recorded earliest, else -1."""
        g, best, bi = self.graph, None, -1
        tns = g.col["t_ns"]
        for i, op in enumerate(cands):
            if op < g.n_prog:
                k = (tns[op] or 0, op)
                if best is None or k < best:
                    best, bi = k, i
        return bi

    def move_first(self, cands: list[int]) -> int:
        """The move enabled earliest (candidates list moves in enabling order), else -1."""
        n_prog = self.graph.n_prog
        for i, op in enumerate(cands):
            if op >= n_prog:
                return i
        return -1
