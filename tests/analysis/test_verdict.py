"""The verdict as data: root causes by default, hypothesis files when asked for or when the
trace's layout makes them relevant, and one-line errors for a broken hypothesis file."""
from __future__ import annotations

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
