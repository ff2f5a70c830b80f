"""The process side of ``kvtrace record -- CMD``: one Recorder per traced process.

The launcher puts ``_site/`` on the child's PYTHONPATH; its ``sitecustomize`` calls
:func:`install`, which patches ``nixl_agent`` in NIXL's ``_api`` module the moment that
module is imported, so every agent the program (or its children) creates is a
TracedAgent. The Recorder is created on first use -- a process that never makes an agent
leaves no shard -- as ``<prog>-<pid>`` under ``$KVTRACE_TRACE_DIR``, and is closed at exit.

The recorder itself and the environment it reads live in ``process_recorder.py``.
"""
from __future__ import annotations

from ..process_recorder import ENV_DIR, ENV_PROG, ENV_TAG, default_recorder, default_request_tags

__all__ = ["ENV_DIR", "ENV_PROG", "ENV_TAG", "default_recorder", "default_request_tags", "install"]


def install() -> None:
    """Patch NIXL's nixl_agent as soon as its module is imported (see ._hook)."""
    from ._hook import install_finder
    install_finder()
