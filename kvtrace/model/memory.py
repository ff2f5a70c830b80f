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
#: out of core, the share of the cap a Python builder running alone (the in-flight sweep)
#: gets for its own arrays: DuckDB's limit is lowered by it meanwhile (TraceModel.build_python).
#: Its pieces take a quarter of the cap (inflight.CAP_SHARE); the rest is its lookup tables
#: and each piece's Arrow rows (~2 GB at 100M events with a 3 GB cap)
BUILDER_SHARE = 0.5
#: a derived table declared in pieces (a "-- pieces:" header, registry.py) is built in as
#: many pieces as keep the rows its pieces split (its hash joins' build sides, as
#: queries/table_bytes.sql sizes them) within this share of the cap each: past it DuckDB's
#: hash join spills both sides, and its probe rows carry every column of the result
#: (end_hold at 10M events under a 300 MB cap: ~9 GB of spill I/O, x5 the in-memory CPU)
PIECE_SHARE = 0.25
#: out of core, the share of the cap DuckDB's own limit gets: its memory_limit counts what its
#: buffer manager holds, and at 100M events under a 3 GB limit the process held ~1 GiB more
#: (allocations DuckDB does not count, allocator slack, Python and Arrow); the rest of the cap
#: is left for those, so the process, not DuckDB alone, stays near the cap
OUT_OF_CORE_DUCKDB_SHARE = 0.75


def duckdb_bytes(cap_bytes: int, database: str) -> int:
    """DuckDB's memory_limit under a cap: all of it in memory, its share out of core."""
    return cap_bytes if database == ":memory:" else int(cap_bytes * OUT_OF_CORE_DUCKDB_SHARE)


def piece_count(build_bytes: float, cap_bytes: int) -> int:
    """How many pieces keep ``build_bytes`` of build-side rows within PIECE_SHARE of the cap."""
    share = max(1, int(cap_bytes * PIECE_SHARE))
    return max(1, -(-int(build_bytes) // share))


def to_bytes(limit: str) -> int:
    """A size as resolve() returns it (e.g. 3GB, 500MB) in bytes (DuckDB's units: KB = 1000)."""
    m = _SIZE.match(limit)
    if not m:
        raise UsageError(f"memory limit {limit!r} is not a size such as 3GB or 500MB")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])


def spill_dir(index_dir: str) -> str:
    return os.path.join(index_dir, f"spill-{os.getpid()}")


#: the derived tables take ~6x the Parquet index's bytes even compressed (a 10M-event
#: trace: 0.37 GB index, ~2.2 GB of compressed tables, ~14 GB uncompressed); when that
#: passes the cap they are built in a database file instead of memory (database_path)
DERIVED_PER_INDEX_BYTE = 6


#: in memory (uncompressed) the derived tables take ~45x the Parquet index's bytes (1M
#: synthetic events: 33 MB index, 1.47 GB of tables; small engine traces ~60x): a model
#: whose index predicts more than the memory share writes its SQL tables straight to
#: Parquet from the first one (will_pass_share); a lower bound, so a trace predicted to
#: pass surely does
UNCOMPRESSED_PER_INDEX_BYTE = 40


def will_pass_share(index_dir: str, share_bytes: int) -> bool:
    """Whether the derived tables will outgrow ``share_bytes`` of memory (see
    UNCOMPRESSED_PER_INDEX_BYTE)."""
    return index_bytes(index_dir) * UNCOMPRESSED_PER_INDEX_BYTE > share_bytes


def index_bytes(index_dir: str) -> int:
    """The Parquet index's size on disk (derived tables and spill left out)."""
    total = 0
    for d, dirs, files in os.walk(index_dir):
        dirs[:] = [x for x in dirs if x != "derived" and not x.startswith("spill-")]
        total += sum(os.path.getsize(os.path.join(d, f)) for f in files if f.endswith(".parquet"))
    return total


def database_path(index_dir: str, cap: str) -> str:
    """Where the model's DuckDB database lives: ``:memory:`` while the derived tables fit
    the cap, else a file in the spill folder (removed at close with the rest of it).

    In memory DuckDB keeps a table's rows uncompressed and can only spill them whole to
    temp files; a CREATE TABLE AS of 100M-event rows (desc_end: two rows per descriptor)
    then runs out of the cap. In a database file every table is written compressed, row
    group by row group, and read back through the buffer pool, so derivation runs out of
    core at any size. KVTRACE_DATABASE=memory|file forces one (tests; comparisons)."""
    force = os.environ.get("KVTRACE_DATABASE", "").strip().lower()
    if force not in ("", "memory", "file"):
        raise UsageError(f"KVTRACE_DATABASE={force!r}: use memory or file")
    if force == "memory" or (not force and index_bytes(index_dir) * DERIVED_PER_INDEX_BYTE <= to_bytes(cap)):
        return ":memory:"
    import uuid   # one file per model: two models of a trace in one process share the spill folder
    return os.path.join(spill_dir(index_dir), f"model-{uuid.uuid4().hex[:12]}.duckdb")


def remove_spill(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_stale_spills(index_dir: str) -> None:
    """Remove the spill folders of processes that no longer run (killed or crashed
    before closing their model: at 100M events one holds GBs of temp files and a
    database file)."""
    try:
        names = os.listdir(index_dir)
    except OSError:
        return
    for name in names:
        pid = name[len("spill-"):]
        if not (name.startswith("spill-") and pid.isdigit()) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            remove_spill(os.path.join(index_dir, name))
        except OSError:     # another user's live process: not ours to remove
            pass
