"""Opening a trace whose index is current reads no stream file: what the streams said
(rows, truncation, the notes on missing files, cut streams and seq gaps) comes from the
index stamp, written when the index was built. Findings, notes and unknowns are the same
as on the first open; a changed stream or a damaged stamp means a full read again."""
from __future__ import annotations

import json
import os

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.model.index import INDEX_DIR, STAMP, ensure_index
from kvtrace.tracer.reader import LazyStream

from analysis_cases import CASES
from partial_cases import cut_stream, drop_shard, lose_events


def _answers(path: str) -> tuple:
    with TraceSession(path) as s:
        found = [(f.check, f.request, f.slots) for f in s.findings()]
        return found, list(s.notes), [u.note() for u in s.unknowns]


def _summaries(p: str) -> dict:
    with open(os.path.join(p, INDEX_DIR, STAMP)) as f:
        return json.load(f)["summaries"]


def _lazy_unread(trace) -> list[bool]:
    return [isinstance(st, LazyStream) and not st.loaded for s in trace.shards for st in s.streams.values()]


DAMAGE = {
    "whole": [],
    "cut events": [cut_stream("prefill", "events", 0.7)],
    "cut descs, lost events": [cut_stream("prefill", "descs", 0.5), lose_events("decode", 0.5, 3)],
    "shard missing": [drop_shard("decode")],
}


@pytest.mark.parametrize("bug", [True, False], ids=["bug", "clean"])
@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_second_open_reads_no_stream_and_answers_the_same(tmp_path, damage, bug):
    p = str(tmp_path / "t.kvtrace")
    CASES["abort_free_inflight"](p, bug=bug)
    for t in DAMAGE[damage]:
        t(p)
    first = _answers(p)
    if not bug:
        assert first[0] == []             # the clean twin stays clean, damaged or not
    elif damage == "whole":
        assert first[0]                   # the bug is found (a cut may take its facts away)
    if damage != "whole":
        assert first[1], "a damaged trace has notes"
    trace, _ = ensure_index(p)
    assert all(_lazy_unread(trace)) or damage == "shard missing"
    assert sum(_lazy_unread(trace)) >= 4
    assert trace.notes == first[1][:len(trace.notes)]
    if damage == "whole":   # a complete trace: opening the model reads no stream either
        with TraceSession(p) as s:
            assert all(_lazy_unread(s.trace))
    assert _answers(p) == first
    # a reader that does want the rows gets exactly those the index holds
    full = {(s.name, t): st.num_rows for s in trace.shards for t, st in s.streams.items()}
    assert {(s.name, t): st.table.num_rows for s in trace.shards for t, st in s.streams.items()} == full


def test_changed_stream_is_read_again(tmp_path):
    p = str(tmp_path / "t.kvtrace")
    CASES["abort_free_inflight"](p, bug=True)
    whole = _answers(p)
    cut_stream("prefill", "events", 0.6)(p)   # after the index was built
    trace, _ = ensure_index(p)                # stamp no longer matches: every stream scanned again
    assert any("truncated" in n for n in trace.notes)
    assert _summaries(p)["prefill"]["streams"]["events"]["truncated"] is True
    cut = _answers(p)
    assert cut != whole and _answers(p) == cut


@pytest.mark.parametrize("summaries", [
    "junk", {"prefill": {"streams": {"events": {"rows": -1}}}},
    None,   # every shard's summary with its counts as strings
])
def test_damaged_stamp_means_a_full_read(tmp_path, summaries):
    p = str(tmp_path / "t.kvtrace")
    CASES["abort_free_inflight"](p, bug=True)
    want = _answers(p)
    stamp = os.path.join(p, INDEX_DIR, STAMP)
    with open(stamp) as f:
        doc = json.load(f)
    if summaries is None:
        for sm in doc["summaries"].values():
            for st in sm["streams"].values():
                if st:
                    st["rows"] = str(st["rows"])
    else:
        doc["summaries"] = summaries
    with open(stamp, "w") as f:
        json.dump(doc, f)
    trace, _ = ensure_index(p)                # scanned again, and the stamp made whole
    assert all(isinstance(sm["streams"]["events"]["rows"], int) for sm in _summaries(p).values())
    assert _answers(p) == want
