"""vLLM 0.34's own NIXL connector (pull mode), driven unmodified by ``vllm_pd.py`` and
recorded with only ``--hooks vllm``: prefill and decode as two processes over real
NIXL/UCX and vLLM's side channel. The driver's verifier says which decode blocks hold
whose bytes; vLLM's own transfer stats say how many READs and descriptors it posted and
the notifications prefill took. A short ``kv_lease_duration`` with a late decode read is
vllm #52234's shape: prefill frees and reuses the blocks, decode still reports success."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine_runs import check, driver, findings, need_engines, record

pytestmark = pytest.mark.slow
VLLM = driver("vllm_pd.py")


def info(trace: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "kvtrace", "info", "--json", trace],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def prefill_report(run) -> dict:
    with open(run.trace[: -len(".kvtrace")] + ".json.prefill") as f:
        return json.load(f)


def test_vllm_clean_transfer_checks_clean_and_trace_holds_every_post(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, [], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    assert len(run.report["requests"]) == 3 and run.report["misaddressed"] == []
    assert "not a supported version" not in run.stderr
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert not res["notes"] or not any("record the" in str(n) for n in res["notes"]), res["notes"]
    got, pre = info(run.trace), prefill_report(run)
    # every posting, descriptor and notification vLLM says it made is in the trace
    assert got["transfers"] == run.report["transfers"] == 3
    assert got["descriptors"] == run.report["descriptors"] > 0
    assert got["bytes"] == run.report["vllm_stats"]["bytes_transferred"]
    assert got["kinds"]["notif_recv"] == pre["notifications"] == 3
    # the hooks' facts: a layout per layer and side, blocks and checksums per request and side
    assert got["layouts"] == 4 and got["requests"] == 3
    assert got["kinds"]["write"] == got["kinds"]["read"] == 3 * 2


def test_vllm_expired_lease_late_read_found_and_verifier_agrees(tmp_path):
    need_engines()
    run = record(tmp_path, VLLM, ["--lease", "2", "--decode-delay", "6"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    bad = run.report["misaddressed"]
    assert bad, "decode should read blocks prefill had already reused"
    wrong = {m["request"] for m in bad}
    res = check(run.trace)
    hits = findings(res, "src_free_before_done")
    named = {f["request"] for f in hits}
    assert wrong <= named, (wrong, named)  # every request the verifier caught is named
    assert {f["check"] for f in findings(res)} == {"src_free_before_done"}
    first = next(f for f in hits if f["request"] == "req-0")
    assert "req-0" in first["message"]
    # what decode read did not match what prefill wrote: explained by the early free
    folded = first["extra"].get("folded", [])
    assert any(x["check"] == "checksum_mismatch" and x["request"] == "req-0" for x in folded), folded
