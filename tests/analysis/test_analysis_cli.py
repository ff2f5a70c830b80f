"""`kvtrace check` and `kvtrace sql`: formats, exit codes that gate CI, one-line errors."""
from __future__ import annotations

import csv
import io
import json

import pytest

from kvtrace.cli import main

from analysis_cases import CASES


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    bug, clean, leak = str(d / "bug.kvtrace"), str(d / "clean.kvtrace"), str(d / "leak.kvtrace")
    CASES["abort_free_inflight"](bug, bug=True)
    CASES["abort_free_inflight"](clean, bug=False)
    CASES["leaked_pages"](leak, bug=True)
    return {"bug": bug, "clean": clean, "leak": leak}


def test_table_exit_codes_and_verdict(traces, capsys):
    assert main(["check", traces["bug"]]) == 1
    out = capsys.readouterr().out
    assert "write_after_free" in out and "VERDICT: 1 root cause found: write_after_free." in out
    assert "Hypotheses" not in out          # one pool: no shipped hypothesis file is relevant
    assert main(["check", traces["bug"], "--hypotheses", "pd-corruption"]) == 1
    out = capsys.readouterr().out
    assert "Hypotheses (pd-corruption)" in out and "supported: slot reuse before read" in out
    assert main(["check", traces["clean"]]) == 0
    assert "No findings" in capsys.readouterr().out


def test_fail_on_warning_gates_warnings(traces, capsys):
    assert main(["check", traces["leak"]]) == 0            # a leak is a warning
    assert main(["check", traces["leak"], "--fail-on", "warning"]) == 1
    capsys.readouterr()


def test_json_and_csv(traces, capsys):
    assert main(["check", traces["bug"], "--format", "json", "--hypotheses", "pd-corruption"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (f,) = doc["findings"]
    assert f["check"] == "write_after_free" and f["request"] == "r1" and f["slots"] == [3, 4]
    assert [r["check"] for r in doc["verdict"]["root_causes"]] == ["write_after_free"]
    assert f["events"] and doc["verdict"]["hypotheses"][1]["status"] == "supported"
    assert main(["check", traces["bug"], "--format", "csv"]) == 1
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["check"] for r in rows] == ["write_after_free"]


def test_only_and_explain(traces, capsys):
    assert main(["check", traces["bug"], "--only", "double_free,leak"]) == 0
    assert main(["check", "--explain", "write_after_free"]) == 0
    assert "sglang #24527" in capsys.readouterr().out
    assert main(["check", "--explain", "all"]) == 0
    assert "layer_offset_mismatch" in capsys.readouterr().out


def test_bad_input_is_one_line_exit_2(traces, tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.kvtrace")]) == 2
    assert main(["check", traces["bug"], "--only", "no_such_check"]) == 2
    assert main(["check", "--explain", "no_such_check"]) == 2
    (tmp_path / "foreign").mkdir()
    assert main(["check", str(tmp_path / "foreign")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 4


def test_sql_query_formats_and_read_only(traces, capsys):
    assert main(["sql", traces["bug"], "select kind, count(*) n from events group by 1 order by 1"]) == 0
    assert "xfer_post" in capsys.readouterr().out
    assert main(["sql", traces["bug"], "select request, side, pool, slot, alloc_seq from end_hold "
                 "where side = 'dst' order by slot", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["request"] for r in rows} == {"r1", "r2"}
    assert main(["sql", traces["bug"], "delete from events"]) == 2
    assert main(["sql", traces["bug"], "select nope from events"]) == 2
    err = capsys.readouterr().err
    assert "read-only" in err and "Traceback" not in err


def test_sql_prompt(traces, capsys, monkeypatch):
    lines = iter(["select count(*) AS n", "from xfers;", ".tables", "drop table events;", ".quit"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert main(["sql", traces["bug"]]) == 0
    out = capsys.readouterr().out
    assert "end_hold" in out and "read-only" in out and "│ 2" in out
