"""SGLang's head-sliced heterogeneous-TP path (``send_kvcache_slice``): MHA pools
(``sglang_pd.py --kv-heads``), each attention-TP rank holding its heads of every token, a
page laid out ``[token][head][head_dim]``; each prefill rank WRITEs, per token, the heads a
decode rank holds at their offset in the decode token. SGLang refuses it for destinations
outside VRAM, so the real run needs a GPU (``gpu``-marked here; run on the H200 by
``scripts/gpu/sglang_h200.sh hetero``, results in bench/results/gpu-h200-sglang.txt).

What runs without a GPU: the driver's cell verifier, the DRAM refusal itself, and the
traces recorded on the H200 (traces/sglang-hetero-tp-heads-*.kvtrace), validated and
checked here.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from cuda_probe import has_cuda
from engine_runs import PY, SGLANG_NEW, check, driver, env_for, findings, need_engines, record

import sglang_pd as drv

SGL = driver("sglang_pd.py")
HEADS = ["--kv-heads", "4"]
TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces")
# recorded on an H100 by scripts/gpu/sglang_h200.sh hetero (SGLang 0.5.21, --kv-heads 4,
# VRAM pools; the driver's verifier: 0 misaddressed cells in both)
P1D2 = os.path.join(TRACES, "sglang-hetero-tp-heads-vram.kvtrace")       # prefill TP 1 -> decode TP 2
P2D1 = os.path.join(TRACES, "sglang-hetero-tp-heads-p2d1-vram.kvtrace")  # prefill TP 2 -> decode TP 1
# the same direction recorded on an H200 (2026-12-06) after the hooks began hashing the aux
# slot each prefill rank sends with its last chunk (tracer/integrations/sglang.py)
P2D1_AUX = os.path.join(TRACES, "sglang-hetero-tp-heads-p2d1-aux-vram.kvtrace")


def geom(tp: int, rank: int) -> dict:
    a = argparse.Namespace(kv_heads=4, head_dim=64, page_tokens=4, kv_layers=2, slots=8, requests=2)
    return drv.geometry(a, tp, rank)


def test_mha_geometry_splits_heads_per_rank():
    g1, g2 = geom(1, 0), geom(2, 1)
    assert g1["regions"] == [(4 * 4 * 128, 8)] * 4        # K0 K1 V0 V1, 4 tokens x 4 heads x 128 B
    assert g2["regions"] == [(4 * 2 * 128, 8)] * 4        # half the heads per token
    assert (g2["heads"], g2["head0"], g2["total_heads"]) == (2, 2, 4)


def test_cell_verifier_flags_every_misplaced_head_slice():
    """A decode rank's page assembled from two prefill ranks' slices checks clean; a slice
    at the wrong head offset, from another token, or missing is found cell by cell."""
    d, (item, n) = geom(1, 0), geom(1, 0)["regions"][0]
    buf = np.zeros(item * n, dtype=np.uint8)
    for r in (0, 1):   # each prefill rank's heads of every token of page 0, into slot 5
        p = geom(2, r)
        src = np.zeros(p["regions"][0][0] * n, dtype=np.uint8)
        drv.stamp_cells(src, p, p["regions"][0][0], [3], drv.MAGIC_WRITTEN, 1000, 1, [0])
        cells = src.reshape(n, 4, 2, 128)[3]               # [token][head][bytes] of slot 3
        buf.reshape(n, 4, 4, 128)[5, :, 2 * r:2 * r + 2] = cells
    assert drv.check_cells(buf, d, item, 5, 1000, 1, 0) == []
    assert len(drv.check_cells(buf, d, item, 5, 1000, 1, 1)) == 16   # another page's bytes
    bad = buf.copy()
    bad.reshape(n, 4, 4, 128)[5, :, 0:2] = bad.reshape(n, 4, 4, 128)[5, :, 2:4]   # head offset lost
    got = drv.check_cells(bad, d, item, 5, 1000, 1, 0)
    assert {(t, h) for t, h, _ in got} == {(t, h) for t in range(4) for h in (0, 1)}
    assert drv.describe(got[0][2]) == "room 1000 region 1 page 0 token 0 head 2"
    bad = buf.copy()
    bad.reshape(n, 4, 4, 128)[5, 1, 3] = bad.reshape(n, 4, 4, 128)[5, 0, 3]      # token 0's cell in token 1
    assert [(t, h) for t, h, _ in drv.check_cells(bad, d, item, 5, 1000, 1, 0)] == [(1, 3)]
    bad = buf.copy()
    bad.reshape(n, 4, 4, 128)[5, 2, 1, 100] ^= 1                                 # one content byte
    assert [(t, h) for t, h, _ in drv.check_cells(bad, d, item, 5, 1000, 1, 0)] == [(2, 1)]
    bad.reshape(n, 4, 4, 128)[5, 3] = 0
    assert drv.describe(drv.check_cells(bad, d, item, 5, 1000, 1, 0)[-1][2]) == "zeros (nothing arrived)"


def test_heads_must_split_over_tp(tmp_path):
    need_engines()
    p = subprocess.run([PY, SGL] + ["--kv-heads", "3", "--prefill-tp", "2"], capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip() == "sglang_pd: --kv-heads 3 does not split over attention TP 2"


@pytest.mark.slow
@pytest.mark.parametrize("sglang", ["0.5.21", "0.5.23"])
def test_dram_head_slices_refused_by_sglang(tmp_path, sglang):
    """On DRAM, prefill's bootstrap thread raises SGLang's refusal when decode registers;
    nothing is sent and the run ends at --timeout."""
    need_engines(SGLANG_NEW)
    p = subprocess.run([PY, SGL] + HEADS + ["--prefill-tp", "2", "--timeout", "15"], capture_output=True,
                       text=True, timeout=240, cwd=str(tmp_path), env=env_for(sglang))
    assert p.returncode != 0
    assert ("NotImplementedError: NIXL heterogeneous-TP direct-to-host KV transfer is not implemented "
            "safely yet") in p.stderr
    assert "decode transfer: rooms" in p.stderr


def aux_overlaps_only(res: dict) -> list[dict]:
    """The findings on a legal prefill TP 2 -> decode TP 1 run: every prefill rank sends the
    request's aux (metadata, identical on every TP rank) into decode's one aux slot, both in
    flight. The hooks hash no aux, so nothing tells identical copies from different ones:
    overlapping_inflight_writes keeps each pair of one request from two source agents as a
    warning (replicas would be legal), never an error, one per request. The KV head slices
    themselves check clean."""
    got = findings(res)
    assert {(f["check"], f["pool"], f["severity"]) for f in got} <= {("overlapping_inflight_writes", "aux", "warning")}, got[:3]
    return got


def kvtrace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvtrace", *args], capture_output=True, text=True, timeout=300)


def sql(trace: str, query: str) -> list[dict]:
    p = kvtrace("sql", trace, query, "--format", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def kv_layouts(trace: str) -> dict:
    """Each agent's kv0 geometry: (layers, slot bytes, slots, page tokens, memory)."""
    rows = sql(trace, "select agent, count(*) n, min(slot_bytes) sb, min(num_slots) ns, min(page_tokens) pt, "
                      "min(mem_type) mem from layouts where pool = 'kv0' group by agent")
    return {r["agent"]: (r["n"], r["sb"], r["ns"], r["pt"], r["mem"]) for r in rows}


def test_recorded_head_slices_decode_tp2_check_clean():
    """Prefill TP 1 -> decode TP 2: the prefill rank's 4 heads a token (2 KiB pages) go out
    as 2 heads (256 B) per token to each decode rank; no finding, no hypothesis supported."""
    assert kvtrace("validate", P1D2).returncode == 0
    res = check(P1D2)
    assert findings(res) == []
    # a decode page holds half of a prefill page: no read's checksum can be predicted, so
    # checksum_mismatch says it compared nothing (skipped, with why), never "holds"
    why = {s["check"]: s["why"] for s in res["skipped"]}
    assert sorted(why) == ["checksum_mismatch", "owner_overwrites_delivered"], res["skipped"]   # no decode writes
    assert "head slice" in why["checksum_mismatch"] and res["verdict"]["checks"]["checksum_mismatch"] == "skipped"
    assert [h["status"] for h in res["verdict"]["hypotheses"]].count("supported") == 0
    assert sorted(kv_layouts(P1D2).values()) == [(4, 1024, 32, 4, "VRAM")] * 2 + [(4, 2048, 32, 4, "VRAM")]
    per = sql(P1D2, "select src_agent, dst_agent, count(*) n, min(nbytes) lo, max(nbytes) hi from descs "
                    "where nbytes <> 64 group by all")
    assert len(per) == 2 and {(r["lo"], r["hi"]) for r in per} == {(256, 256)}     # one token's 2 heads
    assert len({r["src_agent"] for r in per}) == 1 and per[0]["n"] == per[1]["n"]


def test_recorded_head_slices_prefill_tp2_aux_replicas_only_warn():
    """Prefill TP 2 -> decode TP 1: each prefill rank writes its 2 heads of every token at
    their offset in decode's 4-head token; those KV descriptors never overlap and check
    clean. Both prefill ranks also send the request's aux (64 B, the same metadata on every
    TP rank) into decode's one aux slot, posted from two processes with nothing ordering
    them. Regression (bench/results/gpu-h200-sglang.txt, "False positive 1"): that was an
    error on a legal run. The trace holds no checksum of aux (the hooks hash kv_data only),
    so each pair is now a warning saying identical replicas would be legal and to record
    checksummed writes of pool aux; check exits 0."""
    assert kvtrace("validate", P2D1).returncode == 0
    p = kvtrace("check", P2D1, "--format", "json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    got = aux_overlaps_only(res)
    assert sorted((f["request"], f["slots"]) for f in got) == [(str(1000 + i), [i]) for i in range(6)]
    assert all("identical replicas" in f["message"] and "(pool aux)" in f["message"] for f in got)
    writers = sql(P2D1, "select dst_addr, count(distinct src_agent) k, count(*) n from descs where nbytes = 64 "
                        "group by all")
    assert len(writers) == 6 and {(w["k"], w["n"]) for w in writers} == {(2, 2)}
    assert "supported" not in [h["status"] for h in res["verdict"]["hypotheses"]]
    kv = sql(P2D1, "select count(*) n, min(nbytes) lo, max(nbytes) hi from descs where nbytes <> 64")[0]
    assert (kv["lo"], kv["hi"]) == (256, 256)


def test_recorded_aux_replicas_with_checksums_check_clean():
    """The twin of the test above, recorded on a GPU with the hooks that hash the aux slot:
    each prefill rank's copy of a request's aux carries a checksum, the two copies into
    decode's one aux slot carry equal ones, and check finds nothing at all (no warning)."""
    assert kvtrace("validate", P2D1_AUX).returncode == 0
    p = kvtrace("check", P2D1_AUX, "--format", "json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["findings"] == [], res["findings"][:3]
    sums = sql(P2D1_AUX, "select shard, count(*) n, count(distinct checksums[1]) k from events "
                         "where kind = 'write' and pool = 'aux' group by all order by all")
    assert [(r["n"], r["k"]) for r in sums] == [(6, 6), (6, 6)]     # 6 requests, on both prefill ranks
    writers = sql(P2D1_AUX, "select dst_addr, count(distinct src_agent) k from descs where nbytes = 64 group by all")
    assert len(writers) == 6 and {w["k"] for w in writers} == {2}   # both ranks write every aux slot


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("sglang", ["0.5.21", "0.5.23"])
@pytest.mark.parametrize("tp", [("2", "1"), ("1", "2")], ids=["p2d1", "p1d2"])
def test_vram_head_slices_legal_runs(tmp_path, sglang, tp):
    """Both hetero directions on VRAM: every head slice of every page lands where the
    verifier expects it; kvtrace finds nothing (prefill TP 2 -> 1: the ranks' aux copies
    carry equal recorded checksums, so they do not race)."""
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, HEADS + ["--memory", "vram", "--prefill-tp", tp[0], "--decode-tp", tp[1]],
                 hooks="sglang", sglang=sglang)
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["version"] == sglang and run.report["memory"] == "vram"
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    res = check(run.trace)
    # the hooks hash the aux slot each rank sends (the same bytes on every rank here): equal
    # checksums, no finding (the committed p2d1 trace, recorded before, gives the warnings)
    assert aux_overlaps_only(res) == []


@pytest.mark.skipif(has_cuda(), reason="a CUDA GPU is present")
def test_vram_head_slices_need_a_gpu(tmp_path):
    need_engines()
    p = subprocess.run([PY, SGL] + HEADS + ["--memory", "vram", "--prefill-tp", "2"], capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 2 and "needs a CUDA GPU" in p.stderr
