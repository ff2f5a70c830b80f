"""Compressing the derived tables when they near the memory cap (memory.COMPACT_SHARE,
TraceModel._compact) changes how they are stored, never what they hold."""
from __future__ import annotations

import shutil

from kvtrace.model import TraceModel, memory

TRACE = "traces/engine-early-src-free.kvtrace"


def tables(m: TraceModel) -> dict[str, list]:
    out = {}
    for (name,) in m.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall():
        out[name] = sorted(map(repr, m.execute(f'SELECT * FROM "{name}"').fetchall()))
    return out


def test_compressed_tables_hold_the_same_rows(tmp_path, monkeypatch):
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        plain = tables(m)
        kinds = {k for (k,) in m.execute("SELECT DISTINCT compression FROM pragma_storage_info('desc_hold_ids')").fetchall()}
        assert kinds == {"Uncompressed"}            # far below the cap: never compressed
    monkeypatch.setattr(memory, "COMPACT_SHARE", 0.0)   # every object: compress
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        kinds = {k for (k,) in m.execute("SELECT DISTINCT compression FROM pragma_storage_info('desc_hold_ids')").fetchall()}
        assert kinds != {"Uncompressed"}
        assert tables(m) == plain
    assert {"desc_hold_ids", "desc_match_ids", "holdings", "read_predict_ids", "inflight_pairs"} <= set(plain)
