"""The scenarios of cases_legal_patterns.py, damaged as a real recording is (a shard that never
arrived, a stream cut by a crash, control messages sent over the engine's own sockets): a
damaged trace never proves a violation its whole trace lacks, so every clean twin stays clean
and a bug twin shows nothing but (part of) its own bug."""
from __future__ import annotations

import os

import pytest

from kvtrace.analysis.session import TraceSession

from analysis_cases import CASES
from partial_cases import DAMAGE, copy_trace
from test_partial_traces import proven

#: the scenarios with one prefill and one decode shard (the damages name those shards)
NAMES = [n for n, f in CASES.items() if f.__module__ == "cases_legal_patterns" and n != "legal_tp1_to_tp2_heads"]
DAMAGES = ("missing_decode", "missing_prefill", "prefill_events_half", "no_page_messages", "decode_events_lost_middle")
TWINS = [(n, False) for n in NAMES] + [(n, True) for n in NAMES if not n.startswith("legal_")]
#: legal only through the message the damage removes: prefill frees on decode's acknowledgement,
#: and without it the free is early_src_free's, which the checks find on that damage by design
#: (test_partial_traces: the engine must record the control message that orders its free)
#: pull_retry_after_error's bug re-posts the READ while the first is in flight: two READs into
#: the same pages, excused in the whole trace because both carry what prefill wrote before either
#: was posted; without the ready message that write is unordered with the posts, so the two may
#: carry different bytes and overlapping_inflight_writes reports the race (its rule: a race
#: unless equal content is proven)
SKIP = {("free_on_decode_ack", False, "no_page_messages"): "legal only through the ack this damage removes",
        ("pull_retry_after_error", True, "no_page_messages"): "equal content of the two READs unproven without the message"}

_WHOLE: dict = {}


def _whole(tmp_path_factory, name, bug):
    if (name, bug) not in _WHOLE:
        path = str(tmp_path_factory.mktemp("whole") / f"{name}-{int(bug)}.kvtrace")
        CASES[name](path, bug=bug)
        with TraceSession(path) as s:
            _WHOLE[(name, bug)] = path, proven(s.findings())
    return _WHOLE[(name, bug)]


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("name,bug", TWINS)
def test_damage_proves_nothing_the_whole_trace_lacks(tmp_path_factory, tmp_path, name, bug, damage):
    if (name, bug, damage) in SKIP:
        pytest.skip(SKIP[(name, bug, damage)])
    whole_path, whole = _whole(tmp_path_factory, name, bug)
    assert bool(whole) == bug
    path = copy_trace(whole_path, str(tmp_path / os.path.basename(whole_path)))
    for t in DAMAGE[damage]:
        t(path)
    with TraceSession(path) as s:
        found = s.findings()
        assert s.unknowns, "the damage is said"
    extra = {p for p in proven(found) if p[1] is not None} - whole
    assert not extra, [f.message for f in found]
