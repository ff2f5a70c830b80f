"""The format validator (kvtrace.tracer.validate, `kvtrace validate`) and the reader's
required columns: a conforming trace passes, and each break of the contract is named in
one line while its unbroken twin passes."""
from __future__ import annotations

import json
import os
import re
import shutil

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from kvtrace.cli import main
from kvtrace.errors import TraceError
from kvtrace.tracer import open_trace
from kvtrace.tracer.builder import TraceBuilder
from kvtrace.tracer.validate import validate


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    b = TraceBuilder(str(tmp_path_factory.mktemp("v") / "good.kvtrace"))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    d.alloc("r1", "kv", [5, 6]); d.msg_send(p, "m1", request="r1"); p.msg_recv(d, "m1", request="r1")
    p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1"); p.done(x, "r1"); d.read("r1", "kv", [5, 6])
    p.free("r1", "kv", [1, 2]); d.free("r1", "kv", [5, 6])
    return b.close()


def _rewrite(path: str, edit) -> None:
    """Replace an Arrow stream by ``edit(table)`` (read into memory first: a memory map
    would still point into the file being overwritten)."""
    with open(path, "rb") as f:
        t = ipc.open_stream(f.read()).read_all()
    t = edit(t)
    with pa.OSFile(path, "wb") as f, ipc.new_stream(f, t.schema) as w:
        w.write_table(t)


def _drop(col):
    return lambda t: t.drop_columns([col])


def _set(col, values, typ=None):
    def edit(t):
        i = t.schema.get_field_index(col)
        return t.set_column(i, col, pa.array(values(t), typ or t.schema.field(col).type))
    return edit


BREAKS = {
    "descriptor lost mid-list": ("prefill/descs.arrows", lambda t: t.slice(1), "descriptor positions are not 0..n-1"),
    "descriptor lost at a list's end": ("prefill/descs.arrows", lambda t: t.slice(0, t.num_rows - 1),
                                        "descriptor rows hold fewer bytes than their posts moved"),
    "missing column": ("prefill/descs.arrows", _drop("dst_addr"), "missing column dst_addr"),
    "wrong type": ("prefill/events.arrows", _set("layer", lambda t: [str(x) for x in t.column("layer").to_pylist()],
                                                  pa.string()), "events.layer: type string"),
    "seq order": ("prefill/events.arrows", _set("seq", lambda t: list(range(t.num_rows))[::-1]),
                  "seq not strictly increasing"),
    "unknown kind": ("decode/events.arrows", _set("kind", lambda t: ["teleport"] + t.column("kind").to_pylist()[1:]),
                     "unknown event kinds ['teleport']"),
    "null agent": ("decode/layouts.arrows", _set("agent", lambda t: [None] * t.num_rows), "layouts.agent:"),
    "region too small": ("decode/layouts.arrows", _set("nbytes", lambda t: [1] * t.num_rows), "nbytes 1 < slot_bytes"),
}


def test_a_conforming_trace_passes(good, capsys):
    v = validate(good)
    assert v.ok and v.problems == [] and v.notes == []
    assert main(["validate", good]) == 0
    assert capsys.readouterr().out.strip().endswith("conforms")


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_break_is_named_once(good, tmp_path, capsys, name):
    rel, edit, words = BREAKS[name]
    bad = str(tmp_path / "bad.kvtrace")
    shutil.copytree(good, bad)
    _rewrite(os.path.join(bad, rel), edit)
    v = validate(bad)
    assert len(v.problems) == 1 and words in v.problems[0], v.problems
    assert main(["validate", bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvtrace validate: ") and words in err[0]


def test_manifest_breaks(good, tmp_path):
    bad = str(tmp_path / "bad.kvtrace")
    shutil.copytree(good, bad)
    with open(os.path.join(bad, "manifest.json")) as f:
        man = json.load(f)
    with open(os.path.join(bad, "manifest.json"), "w") as f:
        json.dump({**man, "version": 2}, f)
    assert "format/version" in validate(bad).problems[0]
    os.remove(os.path.join(bad, "manifest.json"))
    assert validate(bad).problems == [f"{bad}: no manifest.json"]
    assert validate(str(tmp_path / "nope")).problems == [f"{tmp_path / 'nope'}: no such trace directory"]


def test_allowed_gaps_are_notes_not_problems(good, tmp_path):
    """A listed shard that is missing and a shard not closed: the contract allows both."""
    bad = str(tmp_path / "gaps.kvtrace")
    shutil.copytree(good, bad)
    with open(os.path.join(bad, "manifest.json")) as f:
        man = json.load(f)
    with open(os.path.join(bad, "manifest.json"), "w") as f:
        json.dump({**man, "shards": man["shards"] + ["lost"]}, f)
    info = os.path.join(bad, "decode", "shard.json")
    with open(info) as f:
        si = json.load(f)
    with open(info, "w") as f:
        json.dump({**si, "closed": False}, f)
    v = validate(bad)
    assert v.ok and len(v.notes) == 2, v.notes


def test_reader_refuses_a_stream_without_a_required_column(good, tmp_path):
    """The reader enforces schema.REQUIRED_COLUMNS with one line (no silent null column);
    an optional column (events.thread) may be absent."""
    bad = str(tmp_path / "bad.kvtrace")
    shutil.copytree(good, bad)
    _rewrite(os.path.join(bad, "prefill", "events.arrows"), _drop("thread"))
    assert open_trace(bad).table("events").num_rows > 0
    _rewrite(os.path.join(bad, "prefill", "descs.arrows"), _drop("src_addr"))
    with pytest.raises(TraceError, match=r"descs.arrows: lacks the required column src_addr"):
        open_trace(bad)


def test_the_contract_document_names_every_required_column():
    from kvtrace.tracer.schema import REQUIRED_COLUMNS
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "format.md")).read()
    for table, cols in REQUIRED_COLUMNS.items():
        assert f"**{table}**" in doc, table
        for c in cols:
            assert f"`{c}`" in doc, (table, c)


def _lying_offsets(col):
    """Column ``col`` (strings) rebuilt over the same bytes with one offset pointing 2 GB
    back: the batch still reads, its buffers lie (what one flipped bit can do)."""
    def edit(t):
        a = t.column(col).combine_chunks()
        offsets = pa.array([0, -2**31 + 4] + list(range(2, len(a) + 1)), pa.int32()).buffers()[1]
        bad = pa.Array.from_buffers(pa.string(), len(a), [None, offsets, a.buffers()[2]])
        return t.set_column(t.schema.get_field_index(col), col, bad)
    return edit


def test_corrupt_record_batch_is_named_not_read(good, tmp_path):
    """A record batch that reads but whose string offsets lie is refused in one line naming
    the stream, the batch and the column: by the validator, and by every reader (it reached
    Parquet's writer as an ArrowInvalid traceback before). The untouched twin passes."""
    t = str(tmp_path / "t.kvtrace")
    shutil.copytree(good, t)
    assert validate(t).ok
    open_trace(t)
    _rewrite(os.path.join(t, "prefill/events.arrows"), _lying_offsets("request"))
    v = validate(t)
    assert not v.ok and [p for p in v.problems if re.match(r"prefill/events: record batch \d+ is corrupt \(column request: ", p)], v.problems
    with pytest.raises(TraceError, match=r"events.arrows: record batch \d+ is corrupt \(column request: "):
        open_trace(t)


def test_an_agentless_mark_conforms_an_agentless_alloc_does_not(tmp_path):
    """A user annotation of the whole process (Recorder.mark without an agent) is a valid
    event with a null agent; any other event without its agent breaks the contract, and the
    reader refuses it in one line (tools join every event on its agent)."""
    path = str(tmp_path / "m.kvtrace")
    b = TraceBuilder(path)
    p = b.agent("prefill")
    p.pool("kv", layers=1, slot_bytes=64, num_slots=4)
    b.recorders["prefill"].mark("engine warm")          # agent None
    p.alloc("r1", "kv", [0])
    b.close()
    assert validate(path).ok, validate(path).problems
    open_trace(path)
    _rewrite(os.path.join(path, "prefill", "events.arrows"),
             _set("agent", lambda t: [None if k == "alloc" else a for k, a in
                                      zip(t.column("kind").to_pylist(), t.column("agent").to_pylist())]))
    assert any("events.agent: 1 null value(s)" in q for q in validate(path).problems), validate(path).problems
    with pytest.raises(TraceError, match="column agent has 1 null value"):
        open_trace(path)


def test_descriptor_rows_the_recorder_counted_lost_are_a_note(good, tmp_path):
    """The same lost last row, counted in shard.json's ``lost`` as a recorder does when a write
    fails for good: said, not a breach of the format."""
    bad = str(tmp_path / "counted.kvtrace")
    shutil.copytree(good, bad)
    _rewrite(os.path.join(bad, "prefill/descs.arrows"), lambda t: t.slice(0, t.num_rows - 1))
    p = os.path.join(bad, "prefill", "shard.json")
    info = json.load(open(p))
    info["lost"] = {"rows": {"descs": 1}, "reasons": {"write failed": 1}, "event_seqs": []}
    json.dump(info, open(p, "w"))
    v = validate(bad)
    assert v.problems == [] and any("fewer bytes than their posts moved" in n for n in v.notes), v.notes


def test_slot_events_on_a_pool_no_layout_describes_are_noted(good, tmp_path):
    """Every pool slot events use should have a layout (docs/format.md); one whose layouts
    were lost still conforms (the analysis says what it could not compare) but the
    validator notes which agent's pools no layout describes. Its twin has no such note."""
    assert not [n for n in validate(good).notes if "no layout" in n], validate(good).notes
    t = str(tmp_path / "t.kvtrace")
    shutil.copytree(good, t)
    _rewrite(os.path.join(t, "decode/layouts.arrows"), lambda tab: tab.slice(0, 0))
    v = validate(t)
    assert v.ok, v.problems
    assert [n for n in v.notes if "agent decode's slot events use pool(s) kv that no layout describes" in n], v.notes
