"""kvtrace.tui — the terminal UI (``kvtrace tui TRACE``).

Public pieces (imported from their modules, so ``kvtrace --help`` stays instant):
``app.KvtraceApp`` (the Textual app), ``source.TimelineSource`` (paged, filterable
events in happens-before order), ``facts.Facts`` (slot map and transfer inspector
queries), ``order.ensure_order`` (the ``_index/tui_*`` files built on first open).
"""
