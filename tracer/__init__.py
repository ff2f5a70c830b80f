"""kvtrace.tracer — the trace format, the Recorder, the reader and the trace builder.

Heavy parts (TracedAgent, the reference engine) live in their own modules and are
imported by those who need them.
"""
from .reader import Trace, TraceError, open_trace
from .recorder import Recorder
from .schema import SCHEMA_VERSION, EventKind

__all__ = ["EventKind", "Recorder", "SCHEMA_VERSION", "Trace", "TraceError", "open_trace"]
