"""Background builders (Derived.background: inflight_pairs' sweep) run beside the SQL
objects built after them; their tables are the same as built in turn, and a failure in
one is raised by derive() with the model still closable."""
from __future__ import annotations

import shutil

import pytest

from kvtrace.model import TraceModel, inflight

TRACE = "traces/engine-early-src-free.kvtrace"


def rows(m: TraceModel, name: str) -> list:
    return sorted(map(repr, m.execute(f'SELECT * FROM "{name}"').fetchall()))


def test_background_and_in_turn_give_the_same_tables(tmp_path, monkeypatch):
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        assert not m._pending
        background = {n: rows(m, n) for n in ("inflight_pairs", "desc_match", "read_predict")}
    assert background["inflight_pairs"]            # this trace has overlapping in-flight ends
    monkeypatch.setenv("KVTRACE_DATABASE", "file")   # out of core: built in turn
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        assert {n: rows(m, n) for n in background} == background


def test_a_failing_background_builder_raises_from_derive(tmp_path, monkeypatch):
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)

    def broken(*a, **k):
        raise RuntimeError("sweep failed")
    monkeypatch.setattr(inflight, "build", broken)
    m = TraceModel(path, keep_derived=False)
    with pytest.raises(RuntimeError, match="sweep failed"):
        m.derive()
    assert not m._pending and "inflight_pairs" not in m._built
    assert "desc_match" in m._built               # built beside it, before the failure surfaced
    m.close()
