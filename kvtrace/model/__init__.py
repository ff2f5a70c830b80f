"""The trace model: the one place that derives trace semantics.

Opening a trace (its Parquet index), pairing (post → notification, message send →
receive: ``sync_pairs``), happens-before (``clocks``, ``xfers.know``, ``xfer_seen``),
descriptor ends (→ agent, pool, layer, slot, offset: ``desc_end``, ``end_hold``) and
whether a descriptor is right (``desc_match``), slot ownership (``holdings``) and the
timeline order (``timeline``, order.py) are derived here and nowhere else; analysis
checks, replay and the TUI read them.

Adding a derived object is adding ``sql/<name>.sql`` (one CREATE of ``name``, a header
line ``-- requires: a, b``) or a ``@builder`` in builders.py; the build order follows
from the declarations (registry.py). Named read queries live in ``queries/*.sql``
(``TraceModel.ask``). Imports only the trace format (``kvtrace.tracer`` reader/schema)
and kernels, never analysis, replay, tui or the CLI.
"""
from .trace import TraceModel

__all__ = ["TraceModel"]
