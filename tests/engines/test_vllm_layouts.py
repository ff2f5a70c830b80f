"""vLLM's KV cache layouts, as vLLM registers them with NIXL, recorded with ``--hooks vllm``.

``vllm_pd.py --kv-layout``: ``packed`` (K and V inside each block: one region per layer),
``split`` (every K block then every V block: vLLM registers two regions per layer) and
``mla`` (a DeepSeek-style model, one latent vector per token: one region per layer).
Every region vLLM registered must have a layout with its address, block bytes and block
count; every descriptor vLLM posts must be exactly one slot of one layout on both ends;
clean runs give no finding, and the late-read fault is found in every piece (K and V)."""
from __future__ import annotations

import pytest

from engine_runs import check, driver, findings, need_engines, record
from vllm_facts import as_registered, info, layouts, prefill_report, uncovered

pytestmark = pytest.mark.slow
VLLM = driver("vllm_pd.py")
LAYERS = 2
POOLS = {"packed": {"kv"}, "split": {"kv.K", "kv.V"}, "mla": {"kv"}}


@pytest.mark.parametrize("layout", ["split", "mla"])
def test_vllm_layout_every_region_recorded_and_clean(tmp_path, layout):
    need_engines()
    run = record(tmp_path, VLLM, ["--kv-layout", layout, "--layers", str(LAYERS)], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == [] and len(run.report["requests"]) == 3
    assert run.report["use_mla"] == (layout == "mla")
    pre = prefill_report(run)
    lay = layouts(run.trace)
    for side in (pre, run.report):  # what vLLM registered, region for region
        assert len(side["regions"]) == LAYERS * len(POOLS[layout])
        assert as_registered(lay[side["agent"]]) == sorted(side["regions"], key=lambda r: r["addr"])
        assert {r["pool"] for r in lay[side["agent"]]} == POOLS[layout]
        assert sorted((r["pool"], r["layer"]) for r in lay[side["agent"]]) == sorted(
            (p, i) for p in POOLS[layout] for i in range(LAYERS))
    assert uncovered(run.trace) == []
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert not any("record the" in str(n) for n in res["notes"]), res["notes"]
    got = info(run.trace)
    regions = LAYERS * len(POOLS[layout])
    assert got["descriptors"] == sum(len(r["blocks"]) for r in run.report["requests"]) * regions
    assert got["kinds"]["write"] == got["kinds"]["read"] == 3 * regions


def test_vllm_split_kv_late_read_found_in_both_halves(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, ["--kv-layout", "split", "--lease", "2", "--decode-delay", "6"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    bad = run.report["misaddressed"]
    assert {m["part"] for m in bad} == {0, 1}, "both the K and V halves hold another request's bytes"
    res = check(run.trace)
    assert {f["check"] for f in findings(res)} == {"src_free_before_done"}
    assert {m["request"] for m in bad} <= {f["request"] for f in findings(res)}
    # whose bytes each half holds, from checksums: as the verifier says, K in kv.K, V in kv.V
    said = {(m["request"], "kv." + "KV"[m["part"]], m["layer"], m["block"], "req-" + m["holds"].split()[1])
            for m in bad}
    traced = {(a["request"], a["pool"], a["layer"], a["slot"], a["origin"]["request"]) for a in res["attribution"]
              if a.get("origin")}
    assert said == traced


def test_vllm_mla_kernel_blocks_smaller_than_the_block_clean(tmp_path):
    """vLLM splits a block into the attention backend's smaller kernel blocks and moves each
    one by its own descriptor (CPU_MLA takes 16 tokens; a 32-token block is two). The trace
    keeps the scheduler's blocks as slots, so every descriptor is half a slot: the checks must
    place both halves in their slot and stay clean, and every kernel block is recorded."""
    need_engines()
    run = record(tmp_path, VLLM, ["--kv-layout", "mla", "--kernel-blocks", "--block-size", "32",
                                  "--layers", str(LAYERS)], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    pre = prefill_report(run)
    split = pre["regions"][0]["blocks"] // 16          # kernel blocks per block (16 blocks a side)
    if split == 1:
        pytest.skip("this CPU's MLA backend takes 32-token blocks whole (AMX): no kernel split to test")
    assert run.report["misaddressed"] == [] and len(run.report["requests"]) == 3
    lay = layouts(run.trace)
    for side in (pre, run.report):   # a layout slot is one scheduler block: `split` registered blocks
        rows = lay[side["agent"]]
        assert [(r["addr"], r["num_slots"], r["slot_bytes"]) for r in rows] == sorted(
            (g["addr"], g["blocks"] // split, g["block_stride"] * split) for g in side["regions"])
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert not any("record the" in str(n) for n in res["notes"]), res["notes"]
    got = info(run.trace)
    assert got["descriptors"] == sum(len(r["blocks"]) for r in run.report["requests"]) * LAYERS * split


def test_vllm_mla_kernel_blocks_late_read_found(tmp_path):
    """The bug twin of the above: prefill's lease expires before decode reads, so the
    blocks are freed (and refilled) under the read; found in kernel-block descriptors too."""
    need_engines()
    run = record(tmp_path, VLLM, ["--kv-layout", "mla", "--kernel-blocks", "--block-size", "32",
                                  "--lease", "2", "--decode-delay", "6"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    if prefill_report(run)["regions"][0]["blocks"] == 16:
        pytest.skip("this CPU's MLA backend takes 32-token blocks whole (AMX): no kernel split to test")
    bad = run.report["misaddressed"]
    assert bad, "the verifier saw another request's bytes"
    res = check(run.trace)
    assert {f["check"] for f in findings(res)} == {"src_free_before_done"}
    assert {m["request"] for m in bad} <= {f["request"] for f in findings(res)}
