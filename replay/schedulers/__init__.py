"""Schedulers: pure oracles that pick the next operation (one strategy per file).

``REGISTRY`` is the one list of the strategies a user can name (``--scheduler``); the
CLI, the API and the tests all read it. (ReorderScheduler is internal: minimize uses it.)
"""
from __future__ import annotations

from ...errors import UsageError
from .base import Scheduler
from .conflicts import ConflictsScheduler
from .eager import EagerScheduler
from .lazy import LazyScheduler
from .pct import PctScheduler
from .random import RandomScheduler
from .recorded import RecordedScheduler
from .reorder import ReorderScheduler

#: name -> strategy, in the order help lists them (the name is the class's ``name``)
REGISTRY: dict[str, type[Scheduler]] = {cls.name: cls for cls in (
    RecordedScheduler, EagerScheduler, LazyScheduler, RandomScheduler, PctScheduler, ConflictsScheduler)}
NAMES: tuple[str, ...] = tuple(REGISTRY)


def make_scheduler(name: str, seed: int = 0, depth: int = 3) -> Scheduler:
    """A scheduler by registry name."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise UsageError(f"unknown scheduler {name!r} (one of {', '.join(NAMES)})")
    return cls(seed=seed, depth=depth)


__all__ = ["NAMES", "REGISTRY", "ConflictsScheduler", "EagerScheduler", "LazyScheduler", "PctScheduler",
           "RandomScheduler", "RecordedScheduler", "ReorderScheduler", "Scheduler", "make_scheduler"]
