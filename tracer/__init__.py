"""kvtrace.tracer — the trace format, the Recorder, the reader and the trace builder.

Names are imported lazily (PEP 562) so that `kvtrace --help` does not pay for pyarrow.
"""
from __future__ import annotations

import importlib

_LAZY = {
    "EventKind": ".schema", "SCHEMA_VERSION": ".schema",
    "Recorder": ".recorder", "RingRecorder": ".ring", "open_recorder": ".ring",
    "Trace": ".reader", "TraceError": "..errors", "open_trace": ".reader",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
