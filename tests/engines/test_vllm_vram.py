"""vLLM 0.34's own NIXL connector with its KV caches in GPU memory (``vllm_pd.py --memory
vram``): every layer's cache is a CUDA tensor that vLLM's ``register_kv_caches`` registers
with NIXL as VRAM (``kv_buffer_device`` cuda, vLLM's CUDA platform); ``kvtrace record
--hooks vllm`` hashes the blocks on the GPU. The same cases as on DRAM (test_vllm.py): the
clean run checks clean with every post in the trace, and the expired-lease late read
(vllm #52234's shape) is found block for block. Run on the GPU machine by
scripts/gpu/vllm_h200.sh (results: bench/results/gpu-h200-vllm.txt).
"""
from __future__ import annotations

import subprocess

import pytest
from cuda_probe import has_cuda
from engine_runs import PY, need_engines, record
from test_vllm import LATE_READ, VLLM, assert_clean_run, assert_late_read_found
from vllm_facts import layouts

VRAM = ["--memory", "vram"]


def assert_vram_recorded(run) -> None:
    """Every region both agents registered is VRAM on the GPU the driver was given."""
    assert run.report["memory"] == "vram"
    rows = [r for rs in layouts(run.trace).values() for r in rs]
    assert len(rows) == 4, rows    # 2 layers, one region each, on 2 agents
    assert {(r["mem_type"], r["device"]) for r in rows} == {("VRAM", 0)}, rows


@pytest.mark.gpu
@pytest.mark.slow
def test_vram_vllm_clean_transfer_checks_clean(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, VRAM, hooks="vllm")
    assert_clean_run(run)
    assert_vram_recorded(run)


@pytest.mark.gpu
@pytest.mark.slow
def test_vram_vllm_expired_lease_late_read_found(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, VRAM + LATE_READ, hooks="vllm")
    assert_late_read_found(run)
    assert_vram_recorded(run)


@pytest.mark.skipif(has_cuda(), reason="a CUDA GPU is present: the driver makes VRAM caches")
def test_vram_refused_without_a_gpu(tmp_path):
    need_engines()
    p = subprocess.run([PY, VLLM, "--memory", "vram"], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == ["vllm_pd: --memory vram needs a CUDA GPU: torch sees no CUDA GPU"]
