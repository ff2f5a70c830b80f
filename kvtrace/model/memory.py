"""The memory cap every model runs under, and where it spills past it.

Default: a fraction of the machine's RAM (a 100M-event trace must complete on an 8 GB
machine, so the cap leaves room for Python, Arrow and the OS). ``--memory`` on check /
sql / tui, or the env KVTRACE_DUCKDB_MEMORY, sets it. Past the cap DuckDB spills to a
folder under the trace's index (``_index/spill-<pid>``: the same disk as the trace, not a
small tmpfs), removed when the model closes.
"""
from __future__ import annotations

import os
import re
import shutil

from ..errors import UsageError

#: the share of physical RAM DuckDB may hold by default
RAM_FRACTION = 0.4
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)?\s*$", re.IGNORECASE)


def physical_ram() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def default_limit() -> str:
    """RAM_FRACTION of physical RAM, in MB (DuckDB's own default is 80%)."""
    return f"{int(physical_ram() * RAM_FRACTION / 2**20)}MB"


def resolve(limit: str | None) -> str:
    """The cap to use: ``limit`` if given, else KVTRACE_DUCKDB_MEMORY, else default_limit().

    Raises:
        UsageError: the size is not a number with an optional unit (e.g. 3GB, 500MB).
    """
    val = limit or os.environ.get("KVTRACE_DUCKDB_MEMORY") or default_limit()
    if not _SIZE.match(val):
        raise UsageError(f"memory limit {val!r} is not a size such as 3GB or 500MB")
    return val.replace(" ", "")


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
#: derived tables are compressed (DuckDB CHECKPOINT) once their uncompressed rows hold
#: this share of the cap: DuckDB keeps in-memory tables uncompressed, ~6x their compressed
#: size, so a 10M-event trace's tables (~14 GB) would otherwise spill past a 9 GB cap
COMPACT_SHARE = 0.25


def to_bytes(limit: str) -> int:
    """A size as resolve() returns it (e.g. 3GB, 500MB) in bytes (DuckDB's units: KB = 1000)."""
    m = _SIZE.match(limit)
    if not m:
        raise UsageError(f"memory limit {limit!r} is not a size such as 3GB or 500MB")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])


def spill_dir(index_dir: str) -> str:
    return os.path.join(index_dir, f"spill-{os.getpid()}")


def remove_spill(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
