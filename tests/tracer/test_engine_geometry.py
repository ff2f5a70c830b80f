"""Pool geometry of the presets (no engine run): production sizes index_k the way
SGLang's indexer pool does, and `record --inject` says when a bug cannot fire."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kvtrace.tracer.engine.geometry import impossible_bugs, side_pools
from kvtrace.tracer.engine.workload import load


def _slots(wl, side):
    return {p.name: p.num_slots for p in side_pools(wl, side)}


@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_production_index_k_slot_count_follows_the_dtype(side):
    fp8, bf16 = _slots(load("production", index_k="fp8"), side), _slots(load("production", index_k="bf16"), side)
    assert fp8["index_k"] == fp8["kv"]                    # fp8 pages fill the fp8-sized budget exactly
    assert bf16["kv"] == fp8["kv"] and bf16["index_k"] < bf16["kv"]   # bf16 pages are larger: fewer fit


@pytest.mark.parametrize("workload,index_k,impossible", [
    ("production", "fp8", True), ("production", "bf16", False),
    ("production-dsv4", "fp8", False), ("production-dsv4", "bf16", False),
    ("small", "bf16", True), ("small-mixed", "bf16", False),
])
def test_uniform_slot_count_is_impossible_exactly_when_regions_agree(workload, index_k, impossible):
    wl = load(workload, index_k=index_k)
    assert ("uniform-slot-count" in impossible_bugs(wl)) is impossible


def test_record_warns_when_the_injected_bug_cannot_fire(tmp_path):
    cmd = [sys.executable, "-m", "kvtrace", "record", "--workload", "small",
           "--inject", "uniform-slot-count", "--no-progress", "-o", str(tmp_path / "w.kvtrace")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "warning: --inject uniform-slot-count cannot corrupt anything in workload small" in r.stderr
    twin = subprocess.run(cmd[:5] + ["small-mixed"] + cmd[6:-1] + [str(tmp_path / "m.kvtrace")],
                          capture_output=True, text=True, timeout=120)
    assert twin.returncode == 0 and "warning" not in twin.stderr, twin.stderr


def test_abort_free_inflight_needs_aborts():
    assert "abort-free-inflight" in impossible_bugs(load("small-tight"))
    assert "abort-free-inflight" not in impossible_bugs(load("small-aborts"))
