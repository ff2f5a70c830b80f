"""Load the exporter's SQL files (analysis/sql/export_*.sql) shipped as package data."""
from __future__ import annotations

import functools
from importlib import resources


@functools.lru_cache(maxsize=None)
def load_sql(name: str) -> str:
    """The text of ``analysis/sql/<name>.sql``."""
    return resources.files("kvtrace.analysis.sql").joinpath(name + ".sql").read_text()
