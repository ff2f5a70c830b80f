"""One call per use: build schedulers and executors by name, run, verify, write."""
from __future__ import annotations

import dataclasses

from ..errors import UsageError
from .engine import RunResult, execute
from .graph import Graph, load
from .schedulers import NAMES, make_scheduler
from .schedule import DecisionScheduler, ScheduleError, decode, encode
from .verify import Verdict, verify

EXECUTORS = ("symbolic", "bytes", "nixl")
SCHEDULERS = NAMES          # re-exported: the registry lives in schedulers/__init__.py


def make_executor(name: str = "symbolic", device: str = "cpu"):
    """An executor by name (``device`` applies to the byte executor)."""
    if name == "symbolic":
        from .symbolic import SymbolicExecutor
        return SymbolicExecutor()
    if name == "bytes":
        from .bytes_exec import ByteExecutor
        return ByteExecutor(device)
    if name == "nixl":
        from .nixl_exec import NixlExecutor
        return NixlExecutor()
    raise UsageError(f"unknown executor {name!r} (one of {', '.join(EXECUTORS)})")


@dataclasses.dataclass
class Outcome:
    """One replay: the graph, what ran, what it means, and how to run it again."""
    graph: Graph
    result: RunResult
    verdict: Verdict
    schedule: str
    executor: object
    scheduler: str
    seed: int


def run_graph(graph: Graph, scheduler, executor=None, chunks: int = 1, fault: str | None = None,
              compare_recorded: bool = True, observe_writes: bool = False) -> Outcome:
    """Run and verify an already loaded graph."""
    executor = executor or make_executor()
    res = execute(graph, scheduler, executor, observe_writes)
    v = verify(graph, res, executor, compare_recorded)
    return Outcome(graph, res, v, encode(graph, res.decisions, chunks, fault), executor,
                   scheduler.name, getattr(scheduler, "seed", 0))


def replay(path: str, scheduler: str = "recorded", seed: int = 0, depth: int = 3, executor: str = "symbolic",
           device: str = "cpu", schedule: str | None = None, fault: str | None = None, chunks: int = 1,
           out: str | None = None, graph: Graph | None = None) -> Outcome:
    """Replay a trace under a scheduler (or an exact ``schedule`` string); optionally write ``out``.

    Raises:
        TraceError: unusable trace; ScheduleError: a schedule string that does not fit.
    """
    if schedule:
        sch = decode(schedule)
        if fault and fault != sch.fault:
            raise ScheduleError(f"the schedule was made with fault {sch.fault!r}, not {fault!r}")
        chunks, fault = sch.chunks, sch.fault
        g = graph or load(path, chunks, fault)
        if (g.n_prog, len(g.move_xfer)) != (sch.n_prog, sch.n_moves):
            raise ScheduleError(f"the schedule is for a trace of {sch.n_prog} events and {sch.n_moves} moves; "
                                f"this one has {g.n_prog} and {len(g.move_xfer)}")
        sched = DecisionScheduler(sch.decisions)
    else:
        g = graph or load(path, chunks, fault)
        sched = make_scheduler(scheduler, seed, depth)
    o = run_graph(g, sched, make_executor(executor, device), chunks, fault, observe_writes=bool(out))
    if schedule:
        o.scheduler, o.seed = "schedule", 0
    if out:
        from .output import write_trace
        v = o.verdict
        write_trace(out, g, o.result, o.executor, v, {
            "scheduler": o.scheduler if not schedule else "schedule", "seed": seed if not schedule else None,
            "schedule": o.schedule, "tool": "kvtrace replay",
            "replay": {"source": g.path, "scheduler": scheduler if not schedule else "schedule", "seed": seed,
                       "depth": depth, "executor": executor, "device": device, "fault": fault, "chunks": chunks,
                       "reads_verified": v.reads_verified, "corrupted": len(v.corrupted),
                       "stale_moves": len(v.stale_moves), "out_of_bounds": v.out_of_bounds,
                       "failed": v.failed}})
    return o
