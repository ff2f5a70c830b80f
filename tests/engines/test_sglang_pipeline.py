"""SGLang's pipeline-parallel prefill: each stage is its own process and NIXL agent that
registers only its share of the layers, while a decode without stages holds them all.
SGLang places stage k's entry i into decode's entry of the same layer: by the layer ids
both sides report (``kv_layer_ids``), or, for a plain MLA pool that reports none, at
``prefill_start_layer + i``. Numbered by position, the two ends of every descriptor of a
stage after the first would name different layers: a false layer_offset_mismatch. The hooks
number them as SGLang pairs them (tracer/integrations/sglang.py).

SGLang refuses a destination with more entries than its source outside VRAM, so the real
run needs a GPU (``gpu``-marked here; run on the H200 by ``scripts/gpu/sglang_h200.sh pp``;
not yet run there: no GPU could be had the day this was written).
What runs without one: the driver's stage split, the hooks' numbering rule, and
a decode that runs the same stages (SGLang pairs them position by position, on DRAM too),
clean and with 0.5.21's uniform-slot-count bug.
"""
from __future__ import annotations

import argparse
import subprocess

import pytest
from cuda_probe import has_cuda
from engine_runs import PY, check, driver, findings, need_engines, record, supported

import sglang_pd as drv

from kvtrace.tracer.integrations.sglang import _model_layers, stage_layers

SGL = driver("sglang_pd.py")
# MLA kv and an index-K region per layer (ids: SGLang pairs them by layer), or a plain MLA
# pool (no ids: SGLang places a stage's entries by its prefill_start_layer)
PP_ARGS = {"model": ["--kv-layers", "4", "--index-layers", "4", "--index-k", "tokens", "--prefill-pp", "2"],
           "none": ["--kv-layers", "4", "--index-layers", "0", "--prefill-pp", "2"]}


def args(**kw) -> argparse.Namespace:
    a = drv.parser().parse_args([])
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def test_driver_splits_each_layer_group_over_the_stages():
    a = args(role="prefill", kv_layers=4, index_layers=4, prefill_pp=2)
    g = drv.geometry(a)
    assert [drv.stage_regions(args(**vars(a) | {"pp_rank": k}), g) for k in (0, 1)] == [[0, 1, 4, 5], [2, 3, 6, 7]]
    # per group, the model layer each region holds: kv 2, 3 and index-K 2, 3 on stage 1
    assert drv.layer_ids(a, [2, 3, 6, 7]) == [2, 3, 2, 3]
    assert drv.layer_ids(args(**vars(a) | {"layer_ids": "none"}), [2, 3, 6, 7]) == []
    # decode (no stages) holds every region
    assert drv.stage_regions(args(**vars(a) | {"role": "decode"}), g) == list(range(8))


def test_hooks_number_layers_by_the_ids_sglang_pairs_entries_by():
    names = [("kv0", 0), ("kv0", 1), ("kv1", 0), ("kv1", 1)]   # stage 1's entries, by position
    assert _model_layers(names, [2, 3, 2, 3]) == [("kv0", 2), ("kv0", 3), ("kv1", 2), ("kv1", 3)]
    assert _model_layers(names, []) is None                   # no ids: not numbered by them
    assert _model_layers(names, [2, 3]) is None               # not one per entry
    # K and V of one layer in one pool (an id twice): the position keeps them apart
    assert _model_layers([("kv0", 0), ("kv0", 1)], [5, 5]) is None


def test_a_stage_without_ids_takes_the_layers_of_the_decode_entries_it_is_sent_into():
    # stage 1 of a plain MLA pool into a decode holding all 4 layers: SGLang offsets it
    assert stage_layers([0, 1], [2, 3], [576] * 4) == [2, 3]
    # into a decode running the same stages (positional): the stage's own numbering, even
    # where two of its pools share an item size (the decode's slot counts are not sent, so
    # numbering by item size alone would run the second pool's layers on from the first's)
    assert stage_layers([0, 1, 0, 1], [0, 1, 2, 3], [576] * 4) == [0, 1, 0, 1]
    # offset into a decode of two item sizes: each entry by its place among its size
    assert stage_layers([0, 1], [3, 5], [576, 576, 128, 576, 128, 128]) == [2, 2]


def test_driver_refuses_stages_it_cannot_split(tmp_path):
    need_engines()
    p = subprocess.run([PY, SGL, "--prefill-pp", "2", "--kv-layers", "3"], capture_output=True, text=True,
                       timeout=60, cwd=str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "sglang_pd: --prefill-pp 2 needs MLA pools, TP 1 on both sides and kv and index-K layer counts it divides"]


def layouts_by_agent(trace: str) -> dict:
    """{agent: {pool: [layers]}} of a trace's kv pools."""
    from kvtrace.analysis.session import TraceSession
    s = TraceSession(trace)
    try:
        rows = s.con.sql("SELECT agent, pool, list(DISTINCT layer ORDER BY layer) FROM layouts "
                         "WHERE pool <> 'aux' GROUP BY ALL ORDER BY ALL").fetchall()
    finally:
        s.close()
    out: dict = {}
    for agent, pool, layers in rows:
        out.setdefault(agent, {})[pool] = layers
    return out


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
@pytest.mark.parametrize("ids", ["model", "none"])
def test_decode_running_the_same_stages_checks_clean(tmp_path, ids, version):
    """Decode as the same two stages (DRAM: SGLang pairs stage k with stage k, entry i with
    entry i): every page in place, no finding. With ids each side numbers stage 1's layers
    2-3 (its model layers); without, both sides number them by position, as SGLang pairs them.
    0.5.23's prefill stages also agree on request status through a store on stage 0."""
    need_engines()
    run = record(tmp_path, SGL, PP_ARGS[ids] + ["--decode-pp", "2", "--layer-ids", ids], hooks="sglang",
                 sglang=version if version != "0.5.21" else None)
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["version"] == version
    assert run.report["misaddressed"] == [] and run.report["ranks"] == 2
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert supported(res) == []
    pools = ("kv0", "kv1") if ids == "model" else ("kv0",)
    stage1 = [2, 3] if ids == "model" else [0, 1]
    assert sorted(layouts_by_agent(run.trace).values(), key=lambda v: v["kv0"]) == (
        [{p: [0, 1] for p in pools}] * (2 if ids == "model" else 4)
        + ([{p: stage1 for p in pools}] * 2 if ids == "model" else []))
    assert "pipeline stage" not in run.stderr   # nothing to warn about


@pytest.mark.slow
def test_uniform_slot_count_bug_found_under_stages(tmp_path):
    """0.5.21's uniform-slot-count bug (bytes-sized index-K) with both sides as two stages:
    the layer_offset_mismatch findings are exactly the pages the driver's verifier saw
    misaddressed, on each stage's decode agent (clean twin: the test above)."""
    need_engines()
    run = record(tmp_path, SGL, ["--kv-layers", "4", "--index-layers", "4", "--index-k", "bytes",
                                 "--index-dtype", "bf16", "--prefill-pp", "2", "--decode-pp", "2"], hooks="sglang")
    assert run.rc == 0, run.stderr[-2000:]
    bad = run.report["misaddressed"]
    assert bad and run.report["version"] == "0.5.21"
    res = check(run.trace)
    hits = findings(res, "layer_offset_mismatch")
    want = {(m["agent"], str(m["room"]), "kv0" if m["region"] < 4 else "kv1", m["region"] % 4, m["slot"]) for m in bad}
    got = {(f["agent"], f["request"], f["pool"], f["layer"], s) for f in hits for s in f["slots"]}
    assert got == want
    assert {f["check"] for f in findings(res)} == {"layer_offset_mismatch"}
    assert "uniform slot count" in supported(res)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not has_cuda(), reason="SGLang sends pipeline stages into a larger decode only to VRAM: no CUDA GPU")
@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
@pytest.mark.parametrize("ids", ["model", "none"])
def test_pipeline_stages_into_one_decode_check_clean_vram(tmp_path, ids, version):
    need_engines()
    run = record(tmp_path, SGL, PP_ARGS[ids] + ["--memory", "vram", "--layer-ids", ids, "--timeout", "90"],
                 hooks="sglang", sglang=version if version != "0.5.21" else None)
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == []
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert supported(res) == []
