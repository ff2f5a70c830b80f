"""The TUI's own queries: ``tui/sql/<name>.sql`` (reads of the trace model's tables and
views, parameters as ``?``)."""
from __future__ import annotations

from importlib import resources


def sql_text(name: str) -> str:
    """The text of ``tui/sql/<name>.sql``."""
    return resources.files("kvtrace.tui").joinpath("sql", name + ".sql").read_text()
