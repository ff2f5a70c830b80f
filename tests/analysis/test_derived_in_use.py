"""Saved derived tables of another trace state or kvtrace version are removed when a model
opens, but never while a model that reads them is still open (a long check of a 100M-event
trace lost its tables that way to a second model opened on the trace)."""
from __future__ import annotations

import os

from kvtrace.analysis.session import TraceSession
from kvtrace.model import persist
from kvtrace.model.index import INDEX_DIR

from analysis_cases import CASES


def _keys(p: str) -> set[str]:
    root = os.path.join(p, INDEX_DIR, persist.DERIVED_DIR)
    return set(os.listdir(root))


def test_tables_in_use_are_kept_until_their_model_closes(tmp_path, monkeypatch):
    p = str(tmp_path / "t.kvtrace")
    CASES["abort_free_inflight"](p, bug=True)
    first = TraceSession(p)
    want = [(f.check, f.request, f.slots) for f in first.findings()]
    first.save_derived()
    assert want and len(_keys(p)) == 1
    mine = _keys(p)
    # a model of other code opens the same trace while the first is still open
    monkeypatch.setattr(persist, "_code_hash", "another kvtrace")
    with TraceSession(p) as second:
        assert [(f.check, f.request, f.slots) for f in second.findings()] == want
        assert _keys(p) >= mine               # the first model's tables are still there
    assert len(_keys(p)) == 2                 # and the second's, saved as it closed
    assert [(f.check, f.request, f.slots) for f in first.findings()] == want
    first.close()
    # the next model of the new code removes the tables nobody reads any more
    with TraceSession(p) as third:
        third.findings()
    assert len(_keys(p)) == 1 and _keys(p) != mine
