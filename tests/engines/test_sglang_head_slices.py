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
import subprocess

import numpy as np
import pytest
from cuda_probe import has_cuda
from engine_runs import PY, SGLANG_NEW, check, driver, env_for, findings, need_engines, record

import sglang_pd as drv

SGL = driver("sglang_pd.py")
HEADS = ["--kv-heads", "4"]


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
    request's aux (metadata, identical on every TP rank) into decode's one aux slot, and
    overlapping_inflight_writes, which works on bytes alone, flags each pair (one finding
    per request). The KV head slices themselves check clean."""
    got = findings(res)
    assert {(f["check"], f["pool"]) for f in got} <= {("overlapping_inflight_writes", "aux")}, got[:3]
    return got


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("sglang", ["0.5.21", "0.5.23"])
@pytest.mark.parametrize("tp", [("2", "1"), ("1", "2")], ids=["p2d1", "p1d2"])
def test_vram_head_slices_legal_runs(tmp_path, sglang, tp):
    """Both hetero directions on VRAM: every head slice of every page lands where the
    verifier expects it; kvtrace finds nothing in the KV pools (prefill TP 2 -> 1: only the
    aux false positive, see aux_overlaps_only)."""
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, HEADS + ["--memory", "vram", "--prefill-tp", tp[0], "--decode-tp", tp[1]],
                 hooks="sglang", sglang=sglang)
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["version"] == sglang and run.report["memory"] == "vram"
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    res = check(run.trace)
    got = aux_overlaps_only(res)
    assert len(got) == (6 if tp == ("2", "1") else 0)


@pytest.mark.skipif(has_cuda(), reason="a CUDA GPU is present")
def test_vram_head_slices_need_a_gpu(tmp_path):
    need_engines()
    p = subprocess.run([PY, SGL] + HEADS + ["--memory", "vram", "--prefill-tp", "2"], capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 2 and "needs a CUDA GPU" in p.stderr
