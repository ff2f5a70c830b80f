"""Allocations recorded by another process than the agent's own (vLLM's scheduler naming
its worker's agent): the model cannot order them with the agent's transfers and reads, so
ownership is not checked there, and the note says which pool, which process recorded the
allocations, and what to record instead. Nothing is flagged on the legal split."""
from __future__ import annotations

from kvtrace.analysis.session import TraceSession

from cases_layout import legal_split_scheduler_worker, kv_parts_swap


def test_split_allocations_give_a_note_not_a_finding(tmp_path):
    path = str(tmp_path / "split.kvtrace")
    legal_split_scheduler_worker(path)
    with TraceSession(path) as s:
        assert s.findings() == []
        notes = [n for n in s.notes if "decode's pool kv" in n]
    assert len(notes) == 1, s.notes
    assert "recorded by shard decode-sched" in notes[0] and "decode-worker" in notes[0]


def test_allocations_in_the_agents_own_process_give_no_such_note(tmp_path):
    """The usual layout (allocations recorded where the agent lives): no note, and the
    ownership rules still find a wrong descriptor."""
    path = str(tmp_path / "own.kvtrace")
    expected = kv_parts_swap(path, bug=True)
    with TraceSession(path) as s:
        found = s.findings()
        assert not any("another process" in n for n in s.notes), s.notes
    assert sorted(f.check for f in found) == sorted(e[0] for e in expected) != []
