"""overlapping_inflight_writes by content (view inflight_writes): two overlapping in-flight
writes race only if the bytes they carry may differ. The scenarios are cases_replicas.py's
(their findings are checked with every case in test_analysis_cases.py); here the severity,
the message and the derived rows each outcome rests on."""
from __future__ import annotations

import pytest

from kvtrace.analysis.session import TraceSession

from analysis_cases import CASES


def _run(tmp_path, name, bug=True):
    path = str(tmp_path / f"{name}.kvtrace")
    CASES[name](path, bug=bug)
    with TraceSession(path) as s:
        found = [f for f in s.findings() if f.check == "overlapping_inflight_writes"]
        rows = s.execute("SELECT pool, content, a_request, b_request, a_src_agent, b_src_agent, a_ck, b_ck "
                         "FROM inflight_writes ORDER BY ALL").fetchall()
    return found, rows


@pytest.mark.parametrize("name, bug, content", [
    ("aux_replicas_differ", False, "same"),          # equal checksums: no finding
    ("aux_replicas_differ", True, "different"),
    ("aux_replicas_unhashed", True, "unknown"),
    ("aux_replicas_unhashed", False, "same"),
    ("aux_slot_shared_across_requests", True, "unknown"),
])
def test_each_aux_pair_says_what_it_carries(tmp_path, name, bug, content):
    _, rows = _run(tmp_path, name, bug)
    assert [(r[0], r[1]) for r in rows] == [("aux", content)]
    pool, _, ra, rb, sa, sb, ca, cb = rows[0]
    assert {sa, sb} == {"prefill0", "prefill1"}
    assert (ca is None and cb is None) if content == "unknown" else (ca == cb) == (content == "same")


def test_replicas_of_unknown_content_are_a_warning_naming_what_to_record(tmp_path):
    """The SGLang prefill TP 2 -> decode TP 1 aux false positive (bench/results/
    gpu-h200-sglang.txt, "False positive 1"): kept, as a warning that says identical replicas
    would be legal and which source pool's writes to record."""
    (f,), _ = _run(tmp_path, "aux_replicas_unhashed")
    assert (f.severity, f.pool, f.slots, f.count) == ("warning", "aux", [3], 1)
    assert "from prefill0 and prefill1" in f.message
    assert "identical replicas" in f.message and "(pool aux) before the post" in f.message


@pytest.mark.parametrize("name", ["aux_replicas_differ", "aux_slot_shared_across_requests"])
def test_known_different_or_across_requests_stays_an_error(tmp_path, name):
    (f,), _ = _run(tmp_path, name)
    assert f.severity == "error" and "the surviving bytes depend on timing" in f.message


def test_kv_and_aux_overlaps_of_one_request_pair_are_one_finding_per_pool(tmp_path):
    """Regression: findings grouped by (agent, request pair) and named min(pool), so a KV
    overlap and an aux overlap of one request pair merged under "aux" (results note of
    2026-12-05, the planted head-slice bug). Now the KV one is an error of pool kv with the
    KV slots, the aux one a warning of pool aux."""
    found, _ = _run(tmp_path, "aux_replicas_heads_overlap")
    assert sorted((f.pool, f.severity, f.slots, f.count) for f in found) == \
        [("aux", "warning", [3], 1), ("kv", "error", [2, 3], 4)]
