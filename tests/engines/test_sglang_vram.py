"""SGLang's real NIXL connector with VRAM pools (``sglang_pd.py --memory vram``): the kv and
index-K pools are CUDA tensors that the connector registers and transfers as NIXL VRAM;
``kvtrace record --hooks sglang`` hashes them through the GPU checksum kernel. The same
cases as on DRAM (test_sglang.py): the bug is found page for page, its clean twins stay
clean. Run on the H200 by scripts/gpu/sglang_h200.sh (results: bench/results/gpu-h200-sglang.txt).
"""
from __future__ import annotations

import glob
import os
import subprocess

import pyarrow.ipc as ipc
import pytest
from cuda_probe import has_cuda
from engine_runs import PY, SGLANG_NEW, check, need_engines, record
from test_sglang import SGL, assert_bug_found, assert_clean

VRAM = ["--memory", "vram"]


def pool_memory(trace: str) -> dict[str, set[str]]:
    """Memory kind of each pool's regions as the trace's layouts record them, both agents."""
    out: dict[str, set[str]] = {}
    for f in glob.glob(os.path.join(trace, "*", "layouts.arrows")):
        t = ipc.open_stream(f).read_all()
        for pool, mem in zip(t.column("pool").to_pylist(), t.column("mem_type").to_pylist()):
            out.setdefault(pool, set()).add(mem)
    return out


def assert_vram_recorded(run):
    assert run.report["memory"] == "vram"
    # kv and index-K pools are VRAM on both sides; aux stays DRAM, as SGLang keeps it
    assert pool_memory(run.trace) == {"kv0": {"VRAM"}, "kv1": {"VRAM"}, "aux": {"DRAM"}}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("dtype,idx_slots", [("bf16", 144), ("fp8", 279)])
def test_vram_sglang_0521_bytes_sized_index_k_misaddressed_pages_found(tmp_path, dtype, idx_slots):
    need_engines()
    run = record(tmp_path, SGL, VRAM + ["--index-k", "bytes", "--index-dtype", dtype], hooks="sglang")
    hits = assert_bug_found(run, check(run.trace), idx_slots)
    assert_vram_recorded(run)
    print("\n".join(f["message"] for f in hits))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("version,geometry", [("0.5.21", "tokens"), ("0.5.23", "bytes")])
def test_vram_sglang_clean_twins(tmp_path, version, geometry):
    """Tokens-sized index-K on 0.5.21, and 0.5.23 (fixed) on the buggy geometry: clean, and
    every read's checksum (hashed on the GPU) matches what the producer wrote."""
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, VRAM + ["--index-k", geometry, "--index-dtype", "bf16"], hooks="sglang",
                 sglang=version)
    assert run.report["version"] == version
    res = check(run.trace)
    assert_clean(run, res)
    assert_vram_recorded(run)
    ruled_out = {h["name"] for h in res["verdict"]["hypotheses"] if h["status"] == "ruled out"}
    assert "completion before data" in ruled_out  # reads compared with the writes' checksums


@pytest.mark.skipif(has_cuda(), reason="a CUDA GPU is present: the driver makes VRAM pools")
def test_vram_refused_without_a_gpu(tmp_path):
    need_engines()
    p = subprocess.run([PY, SGL, "--memory", "vram"], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["sglang_pd: --memory vram needs a CUDA GPU: torch sees no CUDA GPU"]
