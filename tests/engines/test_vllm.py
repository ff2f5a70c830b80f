"""vLLM 0.34's own NIXL connector (pull mode), driven unmodified by ``vllm_pd.py`` and
recorded with only ``--hooks vllm``: prefill and decode as two processes over real
NIXL/UCX and vLLM's side channel. The driver's verifier says which decode blocks hold
whose bytes; vLLM's own transfer stats say how many READs and descriptors it posted and
the notifications prefill took. A short ``kv_lease_duration`` with a late decode read is
vllm #52234's shape: prefill frees and reuses the blocks, decode still reports success."""
from __future__ import annotations

import pytest

from engine_runs import check, driver, findings, need_engines, record
from vllm_facts import info, prefill_report

pytestmark = pytest.mark.slow
VLLM = driver("vllm_pd.py")
LATE_READ = ["--lease", "2", "--decode-delay", "6"]


def test_vllm_clean_transfer_checks_clean_and_trace_holds_every_post(tmp_path):
    need_engines()
    assert_clean_run(record(tmp_path, VLLM, [], hooks="vllm"))


def assert_clean_run(run) -> None:
    """The default workload's run: clean, and every post, descriptor and notification the
    driver and vLLM's own stats count is in the trace (test_vllm_vram.py's too)."""
    assert run.rc == 0, run.stderr[-2000:]
    assert len(run.report["requests"]) == 3 and run.report["misaddressed"] == []
    assert "not a supported version" not in run.stderr
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert not res["notes"] or not any("record the" in str(n) for n in res["notes"]), res["notes"]
    got, pre = info(run.trace), prefill_report(run)
    # what the driver did, counted by the driver: one READ per request, one descriptor per
    # (block, registered region), one notification per read prefill took...
    did_reqs = run.report["requests"]
    did_descs = sum(len(r["blocks"]) for r in did_reqs) * len(run.report["regions"])
    assert got["transfers"] == len(did_reqs) == 3
    assert got["descriptors"] == did_descs
    assert got["kinds"]["notif_recv"] == pre["notifications"] == len(pre["requests"]) == 3
    # ...and what vLLM's own stats say it posted
    assert run.report["transfers"] == 3 and run.report["descriptors"] == did_descs
    assert got["bytes"] == run.report["vllm_stats"]["bytes_transferred"]
    # the hooks' facts: a layout per layer and side, blocks and checksums per request and side
    assert got["layouts"] == 4 and got["requests"] == 3
    assert got["kinds"]["write"] == got["kinds"]["read"] == 3 * 2


def test_vllm_expired_lease_late_read_found_and_verifier_agrees(tmp_path):
    need_engines()
    assert_late_read_found(record(tmp_path, VLLM, LATE_READ, hooks="vllm"))


def assert_late_read_found(run) -> None:
    """LATE_READ's run: the verifier's misaddressed blocks are the check's early frees, with
    the checksum mismatch they explain folded in (test_vllm_vram.py's too)."""
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


def whose(run, res) -> tuple[set, set]:
    """(decode request, layer, block, request whose bytes it holds): the verifier's, and the
    trace's attribution of corrupted reads."""
    said = {(m["request"], m["layer"], m["block"], "req-" + m["holds"].split()[1]) for m in run.report["misaddressed"]}
    traced = {(a["request"], a["layer"], a["slot"], a["origin"]["request"]) for a in res["attribution"]
              if a.get("origin")}
    return said, traced


@pytest.mark.parametrize("case,args", [("clean", []), ("late read", LATE_READ)])
def test_vllm_without_control_message_hooks_gives_notes_not_findings(tmp_path, case, args):
    """Without the kv_transfer_params message prefill's blocks and decode's READs are
    unordered: the checks must say what to record (a note), never flag on unordered facts.
    The late-read run still names, from checksums alone, whose bytes each block holds,
    exactly as the verifier says."""
    need_engines()
    run = record(tmp_path, VLLM, args, hooks="vllm:-messages")
    assert run.rc == 0, run.stderr[-2000:]
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert any("unknown" in str(n) and "record the" in str(n) and "message" in str(n) for n in res["notes"]), \
        res["notes"]
    assert info(run.trace)["kinds"].get("msg_send", 0) == 0
    said, traced = whose(run, res)
    assert said == traced
    assert bool(said) == (case == "late read")


def test_vllm_two_engines_in_one_process_keep_their_own_blocks(tmp_path):
    """Prefill and decode engines as two threads of one process: each scheduler half's
    blocks, writes and frees belong to its own engine's worker (its NIXL agent), never to
    whichever worker registered last (that gave double_alloc, leak and layer_offset_mismatch
    on this clean run)."""
    need_engines()
    run = record(tmp_path, VLLM, ["--role", "one-process"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == [] and len(run.report["requests"]) == 3
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    from kvtrace.tracer import open_trace
    ev = open_trace(run.trace).table("events").to_pylist()
    pre, dec = prefill_report(run)["agent"], run.report["agent"]
    by = {(e["kind"], e["agent"]) for e in ev if e["kind"] in ("alloc", "free", "write", "read", "msg_send", "msg_recv")}
    assert by == {(k, pre) for k in ("alloc", "free", "write", "msg_send")} | \
        {(k, dec) for k in ("alloc", "free", "read", "msg_recv")}
    reqs = {r["id"] for r in run.report["requests"]}
    for agent in (pre, dec):  # every request allocated and freed once on each side
        assert sorted(e["request"] for e in ev if e["kind"] == "alloc" and e["agent"] == agent) == sorted(reqs)
        assert sorted(e["request"] for e in ev if e["kind"] == "free" and e["agent"] == agent) == sorted(reqs)


def test_vllm_decode_frees_from_the_workers_finished_ids(tmp_path):
    """The scheduler half in another process (vLLM's multiprocess executor): decode learns
    that a request finished from the finished ids the model runner hands its worker each
    step. Its blocks are freed there, before the next step's blocks (the same ones, reused)
    are handed out: no double allocation, no leak."""
    need_engines()
    run = record(tmp_path, VLLM, ["--decode-finish", "runner"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    blocks = [b for r in run.report["requests"] for b in r["blocks"]]
    assert len(blocks) > len(set(blocks)), "decode must reuse blocks for the order to matter"
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    from kvtrace.tracer import open_trace
    ev = open_trace(run.trace).table("events").to_pylist()
    dec = run.report["agent"]
    freed = [e["request"] for e in ev if e["kind"] == "free" and e["agent"] == dec]
    assert sorted(freed) == sorted(r["id"] for r in run.report["requests"])


def test_vllm_scheduler_in_its_own_process_is_not_flagged(tmp_path):
    """Prefill's scheduler half runs apart from its worker (vLLM's multiprocess executor):
    its blocks cannot be tied to the worker's memory, so the trace has prefill layouts but
    no prefill allocations. Which pages prefill's descriptors read is then unknown (a note
    says so, with the remedy), never 'not held' (no layer_offset_mismatch)."""
    need_engines()
    run = record(tmp_path, VLLM, ["--prefill-scheduler", "process", "--decode-finish", "runner"], hooks="vllm")
    assert run.rc == 0, run.stderr[-2000:]
    assert run.report["misaddressed"] == [] and len(run.report["requests"]) == 3
    said = [ln for ln in run.stderr.splitlines() if ln.startswith("kvtrace: ") and "scheduler" in ln]
    assert len(said) == 1 and "multiprocess executor" in said[0], run.stderr[-2000:]
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    unknown = [n for n in res["notes"] if "no allocation of those requests was recorded" in n]
    assert len(unknown) == 1 and "allocator" in unknown[0], res["notes"]   # said once, with the remedy
