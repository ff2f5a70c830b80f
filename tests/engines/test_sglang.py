"""SGLang's own NIXL connector, recorded unmodified with ``kvtrace record --hooks sglang``.

The uniform-slot-count bug lives in 0.5.21 (``_num_slots_src = kv_data_lens[0] // kv_item_lens[0]``
applied to every entry of the source list); 0.5.23 fixed it. The driver plays the
scheduler (prefill and decode as two processes over real NIXL/UCX, real bootstrap and
ZMQ) and its verifier says which destination pages hold whose bytes; the trace's checks
must agree with it page for page.
"""
from __future__ import annotations

import pytest

from engine_runs import SGLANG_NEW, check, driver, findings, need_engines, record, supported

pytestmark = pytest.mark.slow
SGL = driver("sglang_pd.py")
KV_LAYERS = 2


def pool_layer(region: int) -> tuple[str, int]:
    """The driver's region -> the pool and layer the hooks infer (kv entries, then index-K)."""
    return ("kv0", region) if region < KV_LAYERS else ("kv1", region - KV_LAYERS)


def assert_clean(run, res):
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert supported(res) == []


BUGGY = [("bf16", 144), ("fp8", 279)]  # bytes-sized index-K: slot counts differ from kv's 32


def assert_bug_found(run, res, idx_slots):
    """The verifier's misaddressed pages are exactly the pages of the layer_offset_mismatch
    findings, explained by the source list's misapplied slot count (kv's 32)."""
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["version"] == "0.5.21"
    bad = run.report["misaddressed"]
    assert bad, "the driver's verifier should see index-K layer 1 pages holding other bytes"
    hits = findings(res, "layer_offset_mismatch")
    # exactly the verifier's pages: (request, pool, layer, destination slot)
    want = {(str(m["room"]),) + pool_layer(m["region"]) + (m["slot"],) for m in bad}
    got = {(f["request"], f["pool"], f["layer"], s) for f in hits for s in f["slots"]}
    assert got == want
    assert {f["check"] for f in findings(res)} == {"layer_offset_mismatch"}
    for f in hits:  # the source list's misapplied slot count, not decode's
        assert f["extra"]["stride"] == 32 and f["extra"]["stride_pool"] == "kv0"
        assert f["extra"]["pool_slots"] == idx_slots
        assert "layer * 32 + page" in f["message"]
    assert "uniform slot count" in supported(res)
    return hits


@pytest.mark.parametrize("dtype,idx_slots", BUGGY)
def test_sglang_0521_bytes_sized_index_k_misaddressed_pages_found(tmp_path, dtype, idx_slots):
    need_engines()
    run = record(tmp_path, SGL, ["--index-k", "bytes", "--index-dtype", dtype], hooks="sglang")
    hits = assert_bug_found(run, check(run.trace), idx_slots)
    if dtype == "bf16":
        print("\n".join(f["message"] for f in hits))


def test_sglang_0521_tokens_sized_index_k_clean(tmp_path):
    need_engines()
    run = record(tmp_path, SGL, ["--index-k", "tokens"], hooks="sglang")
    res = check(run.trace)
    assert_clean(run, res)
    assert not any("destination-pages message" in str(n) for n in res["notes"]), res["notes"]


def test_sglang_0523_fixed_release_clean_on_the_buggy_geometry(tmp_path):
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, ["--index-k", "bytes", "--index-dtype", "bf16"], hooks="sglang", sglang="0.5.23")
    assert run.report["version"] == "0.5.23"
    res = check(run.trace)
    assert_clean(run, res)
    assert "not a supported version" not in run.stderr


@pytest.mark.parametrize("version,geometry", [("0.5.21", "tokens"), ("0.5.23", "bytes")])
def test_sglang_clean_without_control_message_hooks_gives_notes_not_findings(tmp_path, version, geometry):
    """Without the destination-pages message decode's allocs are unordered with the post:
    the checks must say so (a note naming the message to record), not flag every descriptor."""
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, ["--index-k", geometry, "--index-dtype", "bf16"], hooks="sglang:-messages",
                 sglang=version)
    res = check(run.trace)
    assert_clean(run, res)
    assert any("record the destination-pages message" in str(n) for n in res["notes"]), res["notes"]
