"""Derived tables kept beside the Parquet index, so the second analysis of a trace (a
second ``kvtrace check``, the TUI after a check, ``--only`` runs) reads them instead of
deriving again.

Each derived object that is a table is written once, right after it is built, to
``_index/derived/<key>/<name>.parquet``; a later model of the same trace opens it as a
view over that file (read out of core, only the columns a query needs); once the
derived tables have passed the memory share (trace.py), a SQL table is written straight
from its query and never held in memory (Store.write). ``key`` names
exactly what the rows depend on: the size and mtime of every file of the trace (streams,
shard.json, manifest: a shard closed or cut changes the analysed prefix), never a
re-read of the trace, and the text of the model's code and SQL (a changed derivation
never reuses rows of the old one). Appending to a trace or a live
shard growing changes the key, so nothing stale is read; folders of other keys are
removed when a model opens. Files are written under a temporary name and renamed, so a
crash or a concurrent model never leaves a half file under a real name.

It is a cache: a trace whose folder cannot be written, or a full disk, only means the
objects are derived again next time.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil

DERIVED_DIR = "derived"
#: the derived tables' Parquet compression: lz4 (LZ4_RAW) writes them cheaper than zstd
#: (10M events: ~-3.5 of ~20 cpu-s writing the six largest) and reads them back as fast, for
#: ~1.5x the disk (412 -> 628 MB; bench/results/checks.txt, 2026-12-05 helper derive)
CODEC = "lz4"
#: the Parquet writer buffers a row group per thread (122,880 rows by default) before it
#: writes it: for a table of more than ROW_GROUP_COLUMNS columns (desc_hold_ids, 59: both ends
#: of a descriptor) its row groups hold ROW_GROUP_CELLS // columns rows, so the buffers take
#: no more memory than a narrower table's; desc_hold_ids written straight from its query ran
#: out of the cap otherwise (1M events under 200 MB; 10M under 300 MB it fell back to a
#: database table moved out after: 18.5 -> 39.7 cpu-s)
ROW_GROUP_COLUMNS = 40
ROW_GROUP_CELLS = 2_000_000


def _row_groups(rel) -> dict:
    """write_parquet's row group option for the rows of ``rel`` (none: DuckDB's default)."""
    n = len(rel.types)
    return {"row_group_size": ROW_GROUP_CELLS // n} if n > ROW_GROUP_COLUMNS else {}
#: the code whose text the derived rows depend on: this package (its builders, SQL and
#: queries), the trace schema, the checksum of never-written memory
_CODE = ("kvtrace.model", "kvtrace.tracer.schema", "kvtrace.kernels.checksum", "kvtrace.kernels.provenance")
_code_hash: str | None = None


def code_hash() -> str:
    """A hash of every file the derivation's rows depend on, and DuckDB's version."""
    global _code_hash
    if _code_hash is None:
        import importlib

        import duckdb

        h = hashlib.sha1(duckdb.__version__.encode())
        for mod in _CODE:
            p = importlib.import_module(mod).__file__
            if os.path.basename(p) == "__init__.py":    # a package: every file in it
                top = os.path.dirname(p)
                files = sorted(os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs if f.endswith((".py", ".sql")))
            else:
                top, files = os.path.dirname(p), [p]
            for f in files:
                h.update(f"{mod}:{os.path.relpath(f, top)}".encode())
                with open(f, "rb") as fh:
                    h.update(hashlib.sha1(fh.read()).digest())
        _code_hash = h.hexdigest()
    return _code_hash


def trace_stamp(trace_path: str) -> list:
    """[relative path, size, mtime_ns] of every file of a trace (its folder and the shard
    folders in it; ``_``-prefixed ones, such as the index, left out), sorted."""
    out = []
    for entry in sorted(os.scandir(trace_path), key=lambda e: e.name):
        if entry.name.startswith("_"):
            continue
        if entry.is_dir():
            for f in sorted(os.scandir(entry.path), key=lambda e: e.name):
                if f.is_file():
                    st = f.stat()
                    out.append([entry.name + "/" + f.name, st.st_size, st.st_mtime_ns])
        elif entry.is_file():
            st = entry.stat()
            out.append([entry.name, st.st_size, st.st_mtime_ns])
    return out


#: in each key's folder: held shared (flock) by every model that reads it
LOCK = ".lock"


def _remove_unused(folder: str) -> None:
    """Remove another key's folder unless a model that is open still reads it (a running
    check of the previous trace state, or of another kvtrace version)."""
    try:
        with open(os.path.join(folder, LOCK), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            shutil.rmtree(folder, ignore_errors=True)
    except OSError:   # not a folder (or already gone)
        if os.path.isfile(folder):
            try:
                os.remove(folder)
            except OSError:
                pass


class Store:
    """The saved derived tables of one trace state (see the module doc)."""

    def __init__(self, index_dir: str, trace_path: str):
        key = hashlib.sha1(json.dumps(trace_stamp(trace_path)).encode())
        key.update(code_hash().encode())
        self.root = os.path.join(index_dir, DERIVED_DIR)
        self.dir = os.path.join(self.root, key.hexdigest()[:20])
        self.enabled = True
        self._lock = None
        try:
            os.makedirs(self.dir, exist_ok=True)
            # held (shared) while this model is open: another model of the trace (a new
            # state, other code) never removes these tables from under it
            self._lock = open(os.path.join(self.dir, LOCK), "a")
            fcntl.flock(self._lock, fcntl.LOCK_SH)
        except OSError:
            self.close()
        try:   # another key's tables describe another trace state or other code: never read again
            for old in sorted(os.listdir(self.root)):
                if os.path.join(self.root, old) != self.dir:
                    _remove_unused(os.path.join(self.root, old))
        except OSError:
            pass

    def close(self) -> None:
        """Let other models of the trace remove these tables (if theirs replace them)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _file(self, name: str) -> str:
        return os.path.join(self.dir, name + ".parquet")

    def load(self, con, name: str) -> bool:
        """Create ``name`` as a view over its saved file; False when there is none (or
        ``name`` already exists: cut.py's tables of a partial trace are made at open)."""
        if not self.enabled or not os.path.exists(self._file(name)) or _kind(con, name) is not None:
            return False
        con.read_parquet(self._source(name)).create_view(name)
        return True

    def _source(self, name: str) -> str:
        """What read_parquet reads for ``name``: its file, or the files of its pieces (a
        table built in pieces is a folder of that name, one file per piece: see write)."""
        out = self._file(name)
        return os.path.join(out, "*.parquet") if os.path.isdir(out) else out

    def save(self, con, name: str) -> bool:
        """Write the table ``name`` (views and macros are cheap to create again: skipped);
        whether it was written."""
        if not self.enabled or _kind(con, name) != "table":
            return False
        out = self._file(name)
        tmp = f"{out}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.dir, exist_ok=True)
            rel = con.table(name)
            rel.write_parquet(tmp, compression=CODEC, **_row_groups(rel))
            if con.read_parquet(tmp).types != con.table(name).types:
                os.remove(tmp)   # a type Parquet cannot hold (HUGEINT reads back as DOUBLE): derive it each time
                return False
            os.replace(tmp, out)
            return True
        except Exception:   # noqa: BLE001  a cache: unwritable folder, full disk, removed by a newer key
            self.enabled = False
            try:
                os.remove(tmp)
            except OSError:
                pass
            return False

    def write(self, con, name: str, query: str, params: list | None = None) -> bool:
        """Write the rows of ``query`` (a derived table's SELECT) straight to ``name``'s file
        and create ``name`` as a view over it, so they never become an in-memory table (past
        the memory share, where the table would only be moved out right after: building it
        in memory first costs ~25% more and crowds the cap); whether it was written (False:
        build the table as usual). ``params``: one set of the query's parameters per piece
        (a table built in pieces, Derived.pieces); with more than one, ``name``'s file is a
        folder holding one file per piece, each piece's query run on its own."""
        import duckdb
        if not self.enabled or _kind(con, name) is not None:
            return False
        runs = params or [None]
        out = self._file(name)
        tmp = f"{out}.{os.getpid()}.tmp"
        files = [tmp] if len(runs) == 1 else [os.path.join(tmp, f"{k:05d}.parquet") for k in range(len(runs))]
        try:
            os.makedirs(tmp if len(runs) > 1 else self.dir, exist_ok=True)
            types = None
            for f, p in zip(files, runs):
                rel = con.sql(query, params=p)
                types = rel.types
                rel.write_parquet(f, compression=CODEC, **_row_groups(rel))
            if con.read_parquet(files).types != types:
                _remove(tmp)   # a type Parquet cannot hold (see save): a table, derived each time
                return False
            os.replace(tmp, out)
        except (OSError, duckdb.IOException):   # a cache: unwritable folder, full disk
            self.enabled = False
            _remove(tmp)
            return False
        except Exception:   # noqa: BLE001  anything else the CREATE TABLE raises again, for real
            _remove(tmp)
            return False
        con.read_parquet(self._source(name)).create_view(name)
        return True

    def move_out(self, con, name: str) -> bool:
        """Save the table ``name``, then replace it by a view over its file (its rows leave
        memory); whether it moved."""
        if not self.save(con, name):
            return False
        con.execute(f'DROP TABLE "{name}"')     # a registry name, never input
        con.read_parquet(self._file(name)).create_view(name)
        return True


def _remove(path: str) -> None:
    """Remove a file, or a folder of piece files (Store.write)."""
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        os.remove(path)
    except OSError:
        pass


def _kind(con, name: str) -> str | None:
    """'table', 'view' or None (no such object)."""
    from .sqltext import query_sql
    rows = con.execute(query_sql("object_kind"), [name]).fetchall()
    return rows[0][0] if rows else None
