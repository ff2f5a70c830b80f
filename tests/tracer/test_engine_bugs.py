"""Each injectable engine bug corrupts pages through real NIXL transfers, and the
engine's verifier says whose bytes they hold; the same workload without the bug is clean."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("nixl._api")

from kvtrace.tracer import open_trace  # noqa: E402
from kvtrace.tracer.engine.cli import record  # noqa: E402
from kvtrace.tracer.engine.workload import load  # noqa: E402


def _run(tmp_path, wl, bugs):
    out = str(tmp_path / ("-".join(bugs) or "clean"))
    return out, record(wl, bugs, out + ".kvtrace")


def _aborted(out):
    return {e["request"] for e in open_trace(out + ".kvtrace").table("events").to_pylist()
            if e["shard"] == "decode" and e["kind"] == "req_abort"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bug", ["early-src-free", "notify-first-handle"])
def test_timing_bug_corrupts_with_attribution(tmp_path, bug, validate_trace):
    wl = load("small")
    out, s = _run(tmp_path, wl, [bug])
    _, twin = _run(tmp_path, wl, [])
    validate_trace(out + ".kvtrace")
    assert twin["corrupted_pages"] == 0 and twin["pages_read"] > 0
    assert s["corrupted_pages"] > 0 and s["corrupted_requests"] > 0
    holds = [e["holds"] for e in s["examples"]]
    if bug == "early-src-free":
        # the source pages were reused by a later request's prefill before the WRITE read them
        assert s["attribution"].get("another request's bytes", 0) > 0
        assert all(h.startswith(("request", "its own")) for h in holds)
    else:
        # decode read before the later chunks landed: those pages still hold old or no bytes
        assert set(s["attribution"]) <= {"never written (poison)", "another request's bytes"}
        assert s["corrupted_by_pool"].get("kv", 0) > 0


@pytest.mark.timeout(120)
def test_uniform_slot_count_misaddresses_index_k(tmp_path):
    """The uniform-slot-count bug: M from buffer 0 indexes every kv_data region. It only bites
    when index_k's slot count differs from kv's (here: its own page size)."""
    wl = load("small-mixed")
    out, s = _run(tmp_path, wl, ["uniform-slot-count"])
    _, twin = _run(tmp_path, wl, [])
    assert twin["corrupted_pages"] == 0
    assert s["corrupted_pages"] > 0 and set(s["corrupted_by_pool"]) == {"index_k"}
    # index_k layer 0 starts at the same index either way; later layers land elsewhere
    assert all(e["layer"] >= 1 for e in s["examples"])
    # with equal page sizes (the default geometry) the same bug moves every byte right
    _, inert = _run(tmp_path / "inert", load("small"), ["uniform-slot-count"])
    assert inert["corrupted_pages"] == 0


@pytest.mark.timeout(120)
def test_abort_free_inflight_late_write_lands_in_next_owner(tmp_path):
    wl = load("small-aborts")   # many aborts in flight; its seed has a late WRITE land after reuse
    out, s = _run(tmp_path, wl, ["abort-free-inflight"])
    _, twin = _run(tmp_path, wl, [])
    assert twin["corrupted_pages"] == 0 and twin["aborted"] == s["aborted"] > 0
    assert s["corrupted_pages"] > 0
    # the bytes found in the victim's pages belong to a request decode had aborted
    aborted = _aborted(out)
    holders = {e["holds"].split("'")[0].split()[-1] for e in s["examples"]}
    assert holders and holders <= aborted
    man = json.load(open(out + ".kvtrace/manifest.json"))
    assert man["inject"] == ["abort-free-inflight"] and man["engine"]["corrupted_pages"] == s["corrupted_pages"]
