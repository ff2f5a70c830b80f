"""Schedulers: pure oracles that pick the next operation (one strategy per file)."""
from .base import Scheduler
from .conflicts import ConflictsScheduler
from .eager import EagerScheduler
from .lazy import LazyScheduler
from .pct import PctScheduler
from .random import RandomScheduler
from .recorded import RecordedScheduler
from .reorder import ReorderScheduler

__all__ = ["ConflictsScheduler", "EagerScheduler", "LazyScheduler", "PctScheduler", "RandomScheduler",
           "RecordedScheduler", "ReorderScheduler", "Scheduler"]
