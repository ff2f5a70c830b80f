"""SGLang's own NIXL connector between prefill and decode of different attention-TP sizes,
recorded unmodified with ``kvtrace record --hooks sglang`` (one process and NIXL agent per
TP rank; the driver's ``--prefill-tp`` / ``--decode-tp``).

The pools are MLA (replicated on every rank), the hetero-TP path SGLang runs on DRAM:
prefill TP 2 -> decode TP 1 reads every page from one prefill rank while the other gets
dummy requests; prefill TP 1 -> decode TP 2 sends the same prefill pages to two decode
agents (every source descriptor read twice, into two agents' identical page numbers).
Both are legal and must check clean; the 0.5.21 uniform-slot-count bug (bytes-sized
index-K) in the same geometry must be found page for page, per decode agent; 0.5.23 on
that geometry stays clean. SGLang's head-sliced path (non-MLA, ``send_kvcache_slice``)
refuses DRAM destinations, so it is not driven here.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine_runs import SGLANG_NEW, check, driver, findings, need_engines, record, supported

pytestmark = pytest.mark.slow
SGL = driver("sglang_pd.py")
KV_LAYERS = 2
HETERO = [["--prefill-tp", "2"], ["--decode-tp", "2"]]
IDS = ["prefill-tp2", "decode-tp2"]


def sql(trace: str, query: str) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "kvtrace", "sql", trace, query, "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def validate(trace: str) -> None:
    p = subprocess.run([sys.executable, "-m", "kvtrace", "validate", trace], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def assert_clean(run, res):
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert supported(res) == []


def assert_pattern(trace: str, tp_args: list[str]) -> None:
    """What the trace shows happened: three agents with kv layouts, and the hetero shape."""
    agents = sql(trace, "select count(distinct agent) n from layouts where pool <> 'aux'")
    assert agents[0]["n"] == 3
    pairs = sql(trace, "select agent, peer, count(*) n from xfers group by all")
    if tp_args[0] == "--prefill-tp":  # one prefill rank posts everything, to the one decode agent
        assert len(pairs) == 1, pairs
    else:  # one prefill agent posts every request to both decode agents: each source read twice
        assert len({p["agent"] for p in pairs}) == 1 and len({p["peer"] for p in pairs}) == 2, pairs
        assert pairs[0]["n"] == pairs[1]["n"]
        fan = sql(trace, "select src_agent, src_addr, nbytes, count(distinct dst_agent) k from descs "
                         "group by all")
        assert fan and {f["k"] for f in fan} == {2}, fan[:4]


def pool_layer(region: int) -> tuple[str, int]:
    return ("kv0", region) if region < KV_LAYERS else ("kv1", region - KV_LAYERS)


@pytest.mark.parametrize("tp_args", HETERO, ids=IDS)
def test_sglang_hetero_tp_legal_run_clean(tmp_path, tp_args):
    need_engines()
    run = record(tmp_path, SGL, ["--index-k", "tokens"] + tp_args, hooks="sglang")
    validate(run.trace)
    res = check(run.trace)
    assert_clean(run, res)
    assert_pattern(run.trace, tp_args)


@pytest.mark.parametrize("tp_args", HETERO, ids=IDS)
def test_sglang_0521_hetero_tp_bytes_sized_index_k_found(tmp_path, tp_args):
    """The verifier's misaddressed pages, per decode agent, are exactly the findings' pages."""
    need_engines()
    run = record(tmp_path, SGL, ["--index-k", "bytes", "--index-dtype", "bf16"] + tp_args, hooks="sglang")
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["version"] == "0.5.21"
    validate(run.trace)
    res = check(run.trace)
    bad = run.report["misaddressed"]
    assert bad
    hits = findings(res, "layer_offset_mismatch")
    assert {f["check"] for f in findings(res)} == {"layer_offset_mismatch"}
    got = {(f["agent"], f["request"], f["pool"], f["layer"], s) for f in hits for s in f["slots"]}
    if "agent" in bad[0]:  # decode TP 2: each rank's pages, named by its agent
        want = {(m["agent"], str(m["room"])) + pool_layer(m["region"]) + (m["slot"],) for m in bad}
        assert len({m["agent"] for m in bad}) == 2
    else:
        (agent,) = {f["agent"] for f in hits}
        want = {(agent, str(m["room"])) + pool_layer(m["region"]) + (m["slot"],) for m in bad}
    assert got == want
    for f in hits:
        assert f["extra"]["stride"] == 32 and f["extra"]["pool_slots"] == 144
    assert "uniform slot count" in supported(res)


@pytest.mark.parametrize("tp_args", HETERO, ids=IDS)
def test_sglang_0523_hetero_tp_same_geometry_clean(tmp_path, tp_args):
    need_engines(SGLANG_NEW)
    run = record(tmp_path, SGL, ["--index-k", "bytes", "--index-dtype", "bf16"] + tp_args, hooks="sglang",
                 sglang="0.5.23")
    assert run.report["version"] == "0.5.23"
    validate(run.trace)
    res = check(run.trace)
    assert_clean(run, res)
    assert_pattern(run.trace, tp_args)
