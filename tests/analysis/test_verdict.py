"""The verdict as data: root causes by default, hypothesis files when asked for or when the
trace's layout makes them relevant, and one-line errors for a broken hypothesis file."""
from __future__ import annotations

import glob
import shutil

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from kvtrace.analysis.hypothesis_files import builtin_names, load
from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main
from kvtrace.errors import UsageError

from analysis_cases import CASES


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("verdict")

    def make(name, bug):
        path = str(d / f"{name}-{int(bug)}.kvtrace")
        CASES[name](path, bug=bug)
        return path
    return make


def test_default_verdict_names_the_root_causes(trace):
    with TraceSession(trace("early_src_free", True)) as s:
        found = s.findings()
        v = s.verdict(found)
    assert [r.check for r in v.root_causes] == ["src_free_before_done"] and v.hypotheses == []
    assert v.lines()[0] == "VERDICT: 1 root cause found: src_free_before_done."
    with TraceSession(trace("early_src_free", False)) as s:
        v = s.verdict()
    assert v.root_causes == [] and v.lines()[0].startswith("VERDICT: no hazard found by the ")


def test_layout_with_mixed_slot_counts_makes_pd_corruption_relevant(trace):
    """kv has 8 slots and index_k 16: the shipped hypotheses apply unasked, on the bug and
    on its clean twin alike (relevance is the layout's, not the findings')."""
    with TraceSession(trace("uniform_slot_count", True)) as s:
        v = s.verdict()
    assert [n for n, _ in v.investigations] == ["pd-corruption"]
    assert [h.name for h in v.supported] == ["uniform slot count"]
    with TraceSession(trace("uniform_slot_count", False)) as s:
        v = s.verdict()
    assert [(h.name, h.status) for h in v.hypotheses][0] == ("uniform slot count", "ruled out"), v.lines()
    with TraceSession(trace("uniform_slot_count", True)) as s:
        assert s.verdict(None, ["none"]).hypotheses == []


def test_a_users_hypothesis_file(trace, tmp_path):
    f = tmp_path / "leaks.toml"
    f.write_text('name = "leaks"\ndescription = "pages never returned"\n'
                 '[[hypothesis]]\nname = "a leak"\nevidence = ["leak"]\nneeds = ["transfers"]\n'
                 'ruled_out = "no leak over {transfers} transfers"\n'
                 '[[hypothesis]]\nname = "prepped misindexing"\nevidence = ["layer_offset_mismatch"]\n'
                 'needs = ["prepped_transfers"]\n')
    with TraceSession(trace("leaked_pages", True)) as s:
        v = s.verdict(None, [str(f)])
    assert [(h.name, h.status) for h in v.hypotheses] == [("a leak", "supported"), ("prepped misindexing", "untestable")]
    assert v.hypotheses[1].reason == "the trace has no prepped (indexed) transfers"
    with TraceSession(trace("leaked_pages", False)) as s:
        v = s.verdict(None, [str(f)])
    assert v.hypotheses[0].status == "ruled out" and v.hypotheses[0].reason.startswith("no leak over 1 transfers")


def test_not_ruled_out_while_an_evidence_check_could_not_run(trace, tmp_path):
    """Ruled out only when every evidence check ran over all its input: with one of them
    skipped (no checksums: checksum_mismatch cannot compare) silence of the others leaves
    the hypothesis untestable, saying which ran and which did not; with both able to run
    (its twin file naming only the one that ran) it is ruled out."""
    path = shutil.copytree(trace("early_src_free", False), str(tmp_path / "nosums.kvtrace"),
                           ignore=shutil.ignore_patterns("_index"))
    for f in glob.glob(path + "/*/events.arrows"):      # the same trace without checksums
        with open(f, "rb") as fh:
            t = ipc.open_stream(fh.read()).read_all()
        i = t.schema.get_field_index("checksums")
        t = t.set_column(i, t.schema.field(i), pa.nulls(t.num_rows, t.schema.field(i).type))
        with pa.OSFile(f, "wb") as fh, ipc.new_stream(fh, t.schema) as w:
            w.write_table(t)
    both = tmp_path / "both.toml"
    both.write_text('name = "x"\ndescription = "d"\n[[hypothesis]]\nname = "early"\n'
                    'evidence = ["read_before_done", "checksum_mismatch"]\nneeds = ["reads"]\n'
                    'ruled_out = "no finding of {checks}"\n')
    one = tmp_path / "one.toml"
    one.write_text(both.read_text().replace('"read_before_done", "checksum_mismatch"', '"read_before_done"'))
    with TraceSession(path) as s:
        h = s.verdict(None, [str(both)]).hypotheses[0]
        assert "checksum_mismatch" in dict(s.checks_skipped)
    assert h.status == "untestable", h
    assert h.reason.startswith("no finding of read_before_done; but that does not rule it out: not checked: "
                               "checksum_mismatch ("), h.reason
    with TraceSession(path) as s:
        h = s.verdict(None, [str(one)]).hypotheses[0]
    assert (h.status, h.reason) == ("ruled out", "no finding of read_before_done"), h


@pytest.mark.parametrize("body,words", [
    ('name = "x"\n[[hypothesis]]\nname = "h"\nevidence = ["no_such_check"]\n', "unknown check 'no_such_check'"),
    ('name = "x"\n[[hypothesis]]\nname = "h"\nevidence = ["leak"]\nneeds = ["nope"]\n', "unknown fact 'nope'"),
    ('name = "x"\n[[hypothesis]]\nname = "h"\nevidence = ["leak"]\nruled_out = "{reads} reads"\n',
     "ruled_out uses {reads}"),
    ('[[hypothesis]]\nname = "h"\nevidence = ["leak"]\n', "name must be a str"),
    ('name = "x"\nrelevant_when = "nope"\n[[hypothesis]]\nname = "h"\nevidence = ["leak"]\n', "unknown fact 'nope'"),
    ('name = [', "not a TOML file"),
])
def test_a_broken_hypothesis_file_is_one_line(trace, tmp_path, capsys, body, words):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(UsageError, match=words.replace("{", r"\{").replace("(", r"\(")):
        load(str(f))
    assert main(["check", trace("early_src_free", True), "--hypotheses", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_unknown_hypothesis_name_is_one_line(trace, capsys):
    assert main(["check", trace("early_src_free", True), "--hypotheses", "no-such"]) == 2
    assert "shipped: pd-corruption" in capsys.readouterr().err


@pytest.mark.parametrize("name", builtin_names())
def test_every_shipped_file_loads(name):
    hf = load(name)
    assert hf.hypotheses and all(h.evidence for h in hf.hypotheses)


def test_findings_twice_are_identical(trace):
    """The session caches the checks' findings; folding must not mutate them (a second
    call used to fold every consequence in again)."""
    with TraceSession(trace("uniform_slot_count", True)) as s:
        first = [f.to_dict() for f in s.findings()]
        second = [f.to_dict() for f in s.findings()]
    assert first == second and first[0]["extra"]["folded"]
