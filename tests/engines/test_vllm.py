"""vLLM 0.34's own NIXL connector (pull mode), driven unmodified by ``vllm_pd.py``: prefill
and decode as two processes over real NIXL/UCX and vLLM's side channel. The driver's
verifier says which decode blocks hold whose bytes; a short ``kv_lease_duration`` with a
late decode read is vllm #52234's shape (prefill frees and reuses the blocks, decode still
reports success)."""
from __future__ import annotations

import pytest

from engine_runs import driver, need_engines, record

pytestmark = pytest.mark.slow
VLLM = driver("vllm_pd.py")


def test_vllm_driver_clean_transfer_every_block_holds_its_own_bytes(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, [], hooks=None)
    assert run.rc == 0, run.stderr[-2000:]
    assert len(run.report["requests"]) == 3
    assert run.report["misaddressed"] == []


def test_vllm_driver_expired_lease_decode_reads_another_requests_bytes(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, ["--lease", "2", "--decode-delay", "6"], hooks=None)
    assert run.rc == 0, run.stderr[-2000:]
    bad = run.report["misaddressed"]
    assert bad and all(m["holds"].startswith("request ") for m in bad), bad[:4]
    assert any(not m["holds"].startswith(f"request {m['request'].split('-')[1]} ") for m in bad)
