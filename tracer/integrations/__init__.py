"""Engine integrations: record a serving engine's own NIXL connector, unmodified.

``kvtrace record --hooks sglang -o DIR -- CMD`` puts ``KVTRACE_HOOKS=sglang`` in CMD's
environment; the injected sitecustomize calls :func:`install`, which waits for the
engine's connector module to be imported and then wraps the classes and methods listed
in ``table.py`` (hook points as data). The wrappers record, into the process's shard,
what NIXL calls alone cannot say: what each registered region means (pool, layer, slot
size), which pages each request holds on each side, checksums of what the producer
wrote and the consumer read, the control messages (destination pages, completion
status) and the request each posting belongs to.

Spec syntax (``--hooks`` / ``KVTRACE_HOOKS``): ``NAME[:-GROUP...][,NAME...]``, e.g.
``sglang:-messages`` records everything but the control messages.

From Python, in the process that runs the engine::

    from kvtrace.tracer.integrations import enable
    enable("run.kvtrace", "sglang")     # before the connector is imported (or after)
"""
from __future__ import annotations

import os

from .table import ENGINES, GROUPS

ENV_HOOKS = "KVTRACE_HOOKS"


class HookSpecError(ValueError):
    """A --hooks value that names no known engine or group."""


def parse(spec: str) -> dict[str, frozenset[str]]:
    """``'sglang:-messages,vllm'`` -> {'sglang': {'messages'}, 'vllm': set()} (groups off)."""
    out: dict[str, frozenset[str]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, *offs = part.split(":")
        if name not in ENGINES:
            raise HookSpecError(f"unknown engine {name!r} for --hooks (known: {', '.join(sorted(ENGINES))})")
        off = set()
        for o in offs:
            g = o.lstrip("-")
            if not o.startswith("-") or g not in GROUPS:
                raise HookSpecError(f"bad hook group {o!r} in --hooks {part!r} "
                                    f"(switch one off with -GROUP; groups: {', '.join(GROUPS)})")
            off.add(g)
        out[name] = frozenset(off)
    if not out:
        raise HookSpecError("--hooks needs an engine name (" + ", ".join(sorted(ENGINES)) + ")")
    return out


def install(spec: str | None = None) -> None:
    """Hook the engines in ``spec`` (default: $KVTRACE_HOOKS) when their connector is imported."""
    spec = spec if spec is not None else os.environ.get(ENV_HOOKS, "")
    if not spec:
        return
    from ._patch import watch
    for name, off in parse(spec).items():
        watch(ENGINES[name], off)


def enable(trace_dir: str, hooks: str, *, prog: str = "proc") -> None:
    """In-process recording: NIXL agents and ``hooks`` engines of this process go to
    ``trace_dir`` (one shard per process, as under ``kvtrace record``)."""
    from .. import autotrace
    parse(hooks)  # bad spec: raise before touching anything
    os.environ.setdefault(autotrace.ENV_DIR, os.path.abspath(trace_dir))
    os.environ.setdefault(autotrace.ENV_PROG, prog)
    os.environ[ENV_HOOKS] = hooks
    autotrace.install()
    install(hooks)
