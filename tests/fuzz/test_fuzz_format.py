"""Fuzzing the trace format: random valid traces (TraceBuilder), then byte flips,
truncations, wrong column types, huge values, duplicate seqs, dropped or emptied columns,
hostile manifest/shard.json values, and message pairings with a cycle, against `info`,
`check`, `replay`, `export`, `report` and the TUI pilot. Every call runs in a forked child
with a time bound: no traceback, no hang, and every refusal is one line with exit 2.

Hypothesis is derandomized (tests/conftest.py) and the default budget small
(KVTRACE_FUZZ_EXAMPLES, default 5 cases x 6 commands, marked slow); a found case goes into
corpus/*.json and is replayed on every run (test_corpus).
"""
from __future__ import annotations

import glob
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("textual")

import fuzzlib  # noqa: E402

HERE = os.path.dirname(__file__)
CORPUS = sorted(glob.glob(os.path.join(HERE, "corpus", "*.json")))
EXAMPLES = int(os.environ.get("KVTRACE_FUZZ_EXAMPLES", "5"))
TIMEOUT = float(os.environ.get("KVTRACE_FUZZ_TIMEOUT", "90"))

traces = st.fixed_dictionaries({
    "seed": st.integers(0, 1000), "requests": st.integers(1, 4), "pages": st.integers(1, 3),
    "layers": st.integers(1, 2), "slots": st.sampled_from([4, 8]), "early_free": st.booleans(),
    "msgs": st.booleans(), "shards": st.sampled_from([1, 2]), "cycle": st.booleans(),
})
idx = st.integers(0, 2**16)
json_values = st.one_of(st.none(), st.integers(-2**70, 2**70), st.text(max_size=8), st.lists(st.text(max_size=4), max_size=3),
                        st.sampled_from(["../x", "/etc", "..", "[b]x[/b]", "<script>"]))
mutations = st.one_of(
    st.fixed_dictionaries({"kind": st.just("flip"), "file": idx, "pos": idx, "bits": st.integers(1, 255)}),
    st.fixed_dictionaries({"kind": st.just("truncate"), "file": idx, "pos": idx}),
    st.fixed_dictionaries({"kind": st.just("wrong_type"), "file": idx, "col": idx, "as": st.sampled_from(["str", "int"])}),
    st.fixed_dictionaries({"kind": st.just("huge"), "file": idx, "col": idx, "row": idx, "big": idx}),
    st.fixed_dictionaries({"kind": st.just("dup_seq"), "file": idx, "col": idx, "row": idx, "row2": idx}),
    st.fixed_dictionaries({"kind": st.sampled_from(["drop_col", "null_col"]), "file": idx, "col": idx}),
    st.fixed_dictionaries({"kind": st.just("manifest"), "key": st.sampled_from(["shards", "version", "format", "workload", "complete"]),
                           "value": json_values}),
    st.fixed_dictionaries({"kind": st.just("shard_json"), "file": idx,
                           "value": st.one_of(json_values, st.fixed_dictionaries({"closed": json_values, "lost": json_values,
                                                                                  "untraced_postings": json_values}))}),
)
cases = st.fixed_dictionaries({"trace": traces, "mutations": st.lists(mutations, min_size=1, max_size=3)})


def check_case(case: dict, workdir: str, commands=tuple(fuzzlib.COMMANDS)) -> dict:
    """Run every command on the case; returns {command: outcome}; fails on a traceback
    or a hang, naming the case so it can be added to the corpus."""
    trace = fuzzlib.make_case(workdir, case)
    got = {}
    for cmd in commands:
        outcome, err = fuzzlib.run_bounded(cmd, trace, os.path.join(workdir, cmd), TIMEOUT)
        got[cmd] = outcome
        assert outcome in ("ok", "refused"), f"{cmd}: {outcome}\ncase: {fuzzlib.case_id(case)}\n{err[-3000:]}"
    return got


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases)
def test_fuzz_commands_never_traceback_or_hang(case, tmp_path_factory):
    check_case(case, str(tmp_path_factory.mktemp("fuzz")))


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("path", CORPUS, ids=[os.path.basename(p)[:-5] for p in CORPUS])
def test_corpus(path, tmp_path):
    """Cases the fuzzer found (each fixed since), replayed on every run."""
    with open(path) as f:
        entry = json.load(f)
    got = check_case(entry["case"], str(tmp_path), tuple(entry.get("commands") or fuzzlib.COMMANDS))
    for cmd, outcome in (entry.get("expect") or {}).items():
        assert got[cmd] == outcome, (cmd, got[cmd], entry.get("why"))


def test_clean_twin_is_ok(tmp_path):
    """The unmutated trace: every command works (so refusals above are about the mutation)."""
    got = check_case({"trace": {"seed": 1, "requests": 2, "early_free": True}, "mutations": []}, str(tmp_path))
    assert set(got.values()) == {"ok"}, got
