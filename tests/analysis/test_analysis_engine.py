"""The reference engine (real NIXL agents on CPU) against the checks: each injected bug is
found by the right check, for the right requests and slots; clean runs give nothing.

Workload: small-mixed (index_k on its own page size, so kv and index_k regions differ in
slot count — the geometry a uniform slot count misaddresses), cut to 12 requests.
"""
from __future__ import annotations

import dataclasses

import pytest

from kvtrace.analysis.session import TraceSession

pytest.importorskip("nixl")


def record(tmp_path, bugs=(), index_k="bf16", processes=1, requests=12):
    from kvtrace.tracer.engine.cli import record as engine_record
    from kvtrace.tracer.engine.workload import load

    wl = dataclasses.replace(load("small-mixed", index_k=index_k), requests=requests)
    out = str(tmp_path / f"{'-'.join(bugs) or 'clean'}-{index_k}-{processes}.kvtrace")
    summary = engine_record(wl, list(bugs), out, processes=processes)
    return out, summary


def facts(s: TraceSession, sql: str) -> set:
    return {tuple(r.values()) for r in s.query(sql).to_pylist()}


@pytest.mark.parametrize("index_k,processes", [
    ("fp8", 1), ("bf16", 1),
    pytest.param("fp8", 2, marks=[pytest.mark.slow, pytest.mark.timeout(120)]),
    pytest.param("bf16", 2, marks=[pytest.mark.slow, pytest.mark.timeout(120)]),
])
def test_clean_engine_gives_no_findings(tmp_path, index_k, processes, validate_trace):
    out, summary = record(tmp_path, index_k=index_k, processes=processes)
    validate_trace(out)
    assert summary["corrupted_pages"] == 0
    with TraceSession(out) as s:
        found = s.findings()
        assert found == [], [f.message for f in found]
        # every check runs but one: the engine records no write of decode's own, so whether
        # decode overwrote delivered pages cannot be examined (said, never read as "holds")
        assert [c for c, _ in s.checks_skipped] == ["owner_overwrites_delivered"], s.checks_skipped
        assert "records no writes of its own" in s.checks_skipped[0][1]
        v = s.verdict(found, ["pd-corruption"])
        assert v.root_causes == [] and [h.status for h in v.hypotheses] == ["ruled out"] * 3, v.lines()


def test_uniform_slot_count_found_with_the_stride(tmp_path):
    out, summary = record(tmp_path, ["uniform-slot-count"])
    with TraceSession(out) as s:
        found = s.findings()
        assert {f.check for f in found} == {"layer_offset_mismatch"}, [f.message for f in found]
        assert all(f.pool == "index_k" and f.agent == "decode" for f in found)
        assert all(f.extra["stride_pool"] == "kv" for f in found)
        # every corrupted page the engine's verifier saw is one the finding names
        flagged = {(f.request, slot) for f in found for slot in f.extra["missing_slots"]}
        for ex in summary["examples"]:
            assert ex["pool"] == "index_k" and (ex["request"], ex["slot"]) in flagged, ex
        assert len({f.request for f in found}) >= summary["corrupted_requests"]
        v = s.verdict(found)        # the pools differ in slot count: pd-corruption applies unasked
        assert v.supported[0].name == "uniform slot count", v.lines()
        assert [r.check for r in v.root_causes] == ["layer_offset_mismatch"]


def test_early_src_free_found_for_every_transferring_request(tmp_path):
    out, _ = record(tmp_path, ["early-src-free"])
    with TraceSession(out) as s:
        found = s.findings()
        assert {f.check for f in found} == {"src_free_before_done"}
        posted = facts(s, "select distinct request from events where kind = 'xfer_post' and agent = 'prefill'")
        assert {(f.request,) for f in found} == posted
        held = facts(s, "select distinct request, slot from slot_ev where agent = 'prefill' and kind = 'alloc'")
        assert all((f.request, slot) in held for f in found for slot in f.slots)
        assert all(f.agent == "prefill" for f in found)


def test_abort_free_inflight_found_on_aborted_requests(tmp_path):
    out, _ = record(tmp_path, ["abort-free-inflight"])
    with TraceSession(out) as s:
        found = s.findings()
        assert found and {f.check for f in found} == {"write_after_free"}, [f.message for f in found]
        aborted = facts(s, "select distinct request from events where kind = 'req_abort' and agent = 'decode'")
        assert {(f.request,) for f in found} <= aborted
        held = facts(s, "select distinct request, slot from slot_ev where agent = 'decode' and kind = 'alloc'")
        assert all((f.request, slot) in held for f in found for slot in f.slots)


def test_notify_first_handle_found_as_completion_before_data(tmp_path):
    out, summary = record(tmp_path, ["notify-first-handle"])
    with TraceSession(out) as s:
        found = s.findings()
        assert found and {f.check for f in found} <= {"read_before_done", "read_undelivered"}
        assert "read_before_done" in {f.check for f in found}
        flagged = {f.request for f in found}
        for ex in summary["examples"]:
            assert ex["request"] in flagged, ex
        multi = facts(s, "select request from xfers where agent = 'prefill' group by 1 having count(*) > 1")
        assert {(r,) for r in flagged} <= multi
        assert s.verdict(found, ["pd-corruption"]).supported[0].name == "completion before data"
