"""Issue 16's answers beyond the scenarios: upstream links in --explain, liveness as state
(not a violation) on a cut trace, the layout differences between the two sides, and
`kvtrace diff` between two traces."""
from __future__ import annotations

import json
import os

import pytest

from kvtrace.analysis.findings import catalog
from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main

from analysis_cases import CASES

#: new check -> upstream reports its --explain text must link
LINKS = {
    "owner_overwrites_delivered": ("sgl-project/sglang/issues/32995", "vllm-project/vllm/pull/47466"),
    "request_waiting": ("vllm-project/vllm/issues/46283", "NVIDIA/TensorRT-LLM/issues/17665",
                        "sgl-project/sglang/pull/36108"),
    "layout_mismatch": ("sgl-project/sglang/pull/19398", "ai-dynamo/dynamo/pull/12821",
                        "NVIDIA/TensorRT-LLM/issues/6507"),
    "buffer_class_not_sent": ("sgl-project/sglang/pull/23773",),
}


@pytest.mark.parametrize("name", sorted(LINKS))
def test_explain_names_the_upstream_reports(name, capsys):
    assert main(["check", "--explain", name]) == 0
    out = capsys.readouterr().out
    for link in LINKS[name]:
        assert "https://github.com/" + link in out


def _cut(path):
    """Mark the decode shard as not closed: the trace ends mid-run."""
    info = os.path.join(path, "decode", "shard.json")
    meta = json.load(open(info))
    meta["closed"] = False
    json.dump(meta, open(info, "w"))


def test_cut_trace_states_what_a_request_waits_for_without_a_finding(tmp_path, capsys):
    path = str(tmp_path / "cut.kvtrace")
    CASES["dropped_completion_notification"](path, bug=True)
    _cut(path)
    with TraceSession(path) as s:
        assert [f.check for f in s.findings()] == []
        assert "request_waiting" in dict(s.checks_skipped)
    assert main(["check", path, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (w,) = out["state_at_trace_end"]
    assert w["request"] == "r1" and "waits for the notification of transfer(s) x0 from prefill" in w["message"]
    assert main(["check", path]) == 0
    text = capsys.readouterr().out
    assert "may still have been in flight" in text and "saw DONE at prefill:" in text


def test_cut_clean_trace_has_no_state_to_report(tmp_path, capsys):
    path = str(tmp_path / "cut.kvtrace")
    CASES["dropped_completion_notification"](path, bug=False)
    _cut(path)
    assert main(["check", path, "--format", "json"]) == 0
    assert "state_at_trace_end" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name,expect", [
    ("bf16_prefill_fp8_decode", {"differs": ["slot_bytes", "bytes_per_token", "dtype"], "consistent": False}),
    ("hybrid_config_mismatch", {"differs": ["slot_bytes", "bytes_per_token"], "consistent": False}),
    ("legal_hetero_tp_head_split", {"differs": ["slot_bytes", "bytes_per_token"], "consistent": True,
                                    "head_split": "2"}),
])
def test_layout_differences_between_the_sides(tmp_path, name, expect, capsys):
    path = str(tmp_path / f"{name}.kvtrace")
    CASES[name](path, bug=True)
    main(["check", path, "--format", "json"])
    diff = json.loads(capsys.readouterr().out)["layout_diff"]
    d = diff[0]
    assert len(diff) == (2 if name.startswith("legal") else 1)   # one line per prefill rank
    for k, v in expect.items():
        assert d[k] == v, d
    if not name.startswith("legal"):   # the twin: same geometry on both sides, nothing to list
        twin = str(tmp_path / f"{name}-twin.kvtrace")
        CASES[name](twin, bug=False)
        main(["check", twin, "--format", "json"])
        assert "layout_diff" not in json.loads(capsys.readouterr().out)


def test_diff_two_traces(tmp_path, capsys):
    a, b = str(tmp_path / "a.kvtrace"), str(tmp_path / "b.kvtrace")
    CASES["bf16_prefill_fp8_decode"](a, bug=False)
    CASES["bf16_prefill_fp8_decode"](b, bug=True)
    assert main(["diff", a, b, "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["checks"] == {"layout_mismatch": {"a": [0, 0], "b": [1, 4]}}
    (row,) = d["layouts"]
    assert (row["agent"], row["pool"]) == ("prefill", "index_k")
    assert row["changed"]["dtype"] == ["fp8", "bf16"] and row["changed"]["slot_bytes"] == ["128", "256"]
    assert main(["diff", a, a]) == 0
    assert "agree" in capsys.readouterr().out
    assert main(["diff", a, str(tmp_path / "nope.kvtrace")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("name,check", [("state_buffers_dropped", "buffer_class_not_sent"),
                                        ("hybrid_decode_clears_state", "owner_overwrites_delivered"),
                                        ("abort_while_waiting_leaks", "request_waiting")])
def test_new_checks_in_the_report(tmp_path, name, check):
    from kvtrace.analysis.report import write_report

    path = str(tmp_path / f"{name}.kvtrace")
    CASES[name](path, bug=True)
    with TraceSession(path) as s:
        write_report(s, str(tmp_path / "r.html"))
    assert f"<td>{check}</td>" in open(tmp_path / "r.html").read()
