"""The trace model: the one place that derives trace semantics.

Opening a trace (its Parquet index), pairing (post → notification, message send →
receive), descriptor ends (→ agent, pool, layer, slot, offset), slot ownership
(holdings) and event order (happens-before) are derived here and nowhere else;
analysis checks, replay and the TUI read them. Imports only the trace format
(``kvtrace.tracer`` reader/schema) and kernels, never analysis, replay, tui or the CLI.
"""
from .trace import TraceModel

__all__ = ["TraceModel"]
