"""kvtrace.replay — deterministic re-execution of a trace under seeded interleavings.

    from kvtrace.replay import replay, load, explore, minimize
    o = replay("run.kvtrace", scheduler="pct", seed=3, out="r.kvtrace")
    o.verdict.failed, o.verdict.lines(o.graph), o.schedule      # 'kvs1:...'
    replay("run.kvtrace", schedule=o.schedule)                    # the same run again

Pieces: ``graph`` (trace → operation graph), ``engine`` (runs it under a scheduler),
``schedulers/`` (one strategy per file), ``symbolic`` / ``bytes_exec`` / ``nixl_exec``
(executors), ``verify``, ``schedule`` (strings), ``exploration``, ``minimization``, ``output``.
"""
import importlib

# Lazy: the CLI imports kvtrace.replay.cli_* for `kvtrace --help`, which must not pay
# for pyarrow (~0.2 s); names load from their modules on first use.
_WHERE = {
    "EXECUTORS": "api", "SCHEDULERS": "api", "Outcome": "api", "make_executor": "api",
    "make_scheduler": "api", "replay": "api", "run_graph": "api", "RunResult": "engine",
    "execute": "engine", "Exploration": "exploration", "explore": "exploration", "Graph": "graph", "load": "graph",
    "Minimized": "minimization", "minimize": "minimization", "ScheduleError": "schedule", "decode": "schedule",
    "encode": "schedule", "Verdict": "verify", "verify": "verify",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value   # cache: later lookups skip __getattr__
    return value
