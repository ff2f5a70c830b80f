"""Derived tables saved beside the index (kvtrace/model/persist.py): a second model of the
same trace reads them back — same rows, same findings — on a complete trace and on
partial ones (whose cut first derives objects of the uncut trace: never saved), bug and
clean twins; a trace that changed afterwards (a stream grew or was cut, a shard closed)
never reads the old ones; keep_derived=False writes nothing."""
from __future__ import annotations

import os

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.model.persist import DERIVED_DIR
from kvtrace.model.registry import registry
from kvtrace.model.sqltext import query_sql

from partial_cases import DAMAGE, copy_trace

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces")
CASES = [("early-src-free", None), ("clean", None), ("notify-first-handle", "decode_events_half"),
         ("early-src-free", "prefill_events_lost_middle"), ("clean", "missing_decode")]


def make(tmp_path, example: str, damage: str | None) -> str:
    path = copy_trace(os.path.join(TRACES, f"engine-{example}.kvtrace"), str(tmp_path / "t.kvtrace"))
    for t in DAMAGE.get(damage, []):
        t(path)
    return path


def kind(s: TraceSession, name: str) -> str | None:
    rows = s.execute(query_sql("object_kind"), [name]).fetchall()
    return rows[0][0] if rows else None


def snapshot(s: TraceSession, names) -> dict:
    return {n: sorted(map(repr, s.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names}


def summary(findings) -> list:
    return sorted((f.check, f.severity, f.request, f.agent, f.pool, f.count, tuple(sorted(f.events)), f.message)
                  for f in findings)


def analyse(path: str, keep: bool) -> tuple[dict, list, dict]:
    with TraceSession(path, keep_derived=keep) as s:
        # a partial trace's cut makes these when it opens: they stay as made
        made_at_open = {n for n in registry() if kind(s, n)}
        s.derive()
        kinds = {n: kind(s, n) for n in sorted(s._built)}
        kinds = {n: k for n, k in kinds.items() if k}        # macros (ev, hb) hold no rows
        rows = snapshot(s, kinds)
        return rows, summary(s.findings()), {n: k for n, k in kinds.items() if n not in made_at_open}


def saved(path: str) -> list[str]:
    root = os.path.join(path, "_index", DERIVED_DIR)
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


@pytest.mark.parametrize("example,damage", CASES)
def test_saved_tables_read_back_the_same(tmp_path, example, damage):
    path = make(tmp_path, example, damage)
    rows, found, _ = analyse(path, keep=False)
    assert saved(path) == []
    rows1, found1, kinds1 = analyse(path, keep=True)          # derives, then saves at close
    assert "table" in kinds1.values()
    assert len(saved(path)) == 1
    rows2, found2, kinds2 = analyse(path, keep=True)          # reads them back
    tables = [n for n, k in kinds1.items() if k == "table"]
    assert [n for n in tables if kinds2[n] != "view"] == []
    assert rows1 == rows and rows2 == rows
    assert found1 == found and found2 == found
    if example != "clean" and damage is None:
        assert found, "the bug twin is found"
    if example == "clean" and damage is None:
        assert not [x for x in found if x[1] == "error"], "the clean twin stays clean"


@pytest.mark.parametrize("damage", ["decode_events_half", "prefill_descs_half"])
def test_a_changed_trace_never_reads_the_old_tables(tmp_path, damage):
    """Saved on the whole trace, then the trace changes (a stream cut short, the shard
    left unclosed): the next model derives again and agrees with a model that never saved."""
    path = make(tmp_path, "early-src-free", None)
    analyse(path, keep=True)
    before = saved(path)
    for t in DAMAGE[damage]:
        t(path)
    rows, found, kinds = analyse(path, keep=True)
    fresh_rows, fresh_found, fresh_kinds = analyse(path, keep=False)
    assert kinds == fresh_kinds                              # nothing read from the old key
    assert saved(path) != before and len(saved(path)) == 1   # the old key's folder is gone
    assert rows == fresh_rows and found == fresh_found


def test_a_touched_file_changes_the_key(tmp_path):
    """Only sizes and mtimes are compared (the trace is never re-read): a shard.json
    rewritten in place (a recorder closing its shard) is a new trace state."""
    path = make(tmp_path, "clean", None)
    analyse(path, keep=True)
    before = saved(path)
    p = os.path.join(path, "decode", "shard.json")
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    _, _, kinds = analyse(path, keep=True)
    assert kinds == analyse(path, keep=False)[2]
    assert saved(path) != before


def test_not_kept_writes_nothing(tmp_path, monkeypatch):
    path = make(tmp_path, "clean", None)
    analyse(path, keep=False)
    monkeypatch.setenv("KVTRACE_KEEP_DERIVED", "0")
    analyse(path, keep=None)
    assert saved(path) == []


@pytest.mark.parametrize("example,damage", [("early-src-free", None), ("notify-first-handle", "decode_events_half")])
def test_tables_moved_out_of_memory_hold_the_same(tmp_path, monkeypatch, example, damage):
    """Past the memory share (memory.COMPACT_SHARE; 0 here: every object) the derived
    tables leave memory for their saved files while deriving: later objects and the checks
    read them there, with the same rows and findings."""
    from kvtrace.model import memory
    path = make(tmp_path, example, damage)
    rows, found, kinds = analyse(path, keep=False)
    monkeypatch.setattr(memory, "COMPACT_SHARE", 0.0)
    rows1, found1, kinds1 = analyse(path, keep=True)
    moved = [n for n, k in kinds.items() if k == "table" and kinds1[n] == "view"]
    assert "desc_hold_ids" in moved and "read_predict_ids" in moved
    assert rows1 == rows and found1 == found
    rows2, found2, _ = analyse(path, keep=True)               # and the next model reads them
    assert rows2 == rows and found2 == found
