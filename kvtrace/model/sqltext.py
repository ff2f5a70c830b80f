"""The text of the model's named queries (``queries/<name>.sql``): read-only SELECTs with
``?`` parameters, run through TraceModel.ask (a leaf module, so builders may use it too)."""
from __future__ import annotations

import importlib.resources


def query_sql(name: str) -> str:
    """The text of ``queries/<name>.sql``."""
    return importlib.resources.files("kvtrace.model.queries").joinpath(name + ".sql").read_text()
