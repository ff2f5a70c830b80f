"""vLLM 0.34's NIXL connector driven by vLLM's own engine loop (``vllm_engine_pd.py``: the real
``Scheduler`` with prefix caching on both sides and the CPU model runner's connector glue),
recorded with only ``--hooks vllm``. The workload holds legal patterns a naive checker flags:

- prefill-side prefix sharing: two requests hand decode the same prefill blocks, and decode
  READs them with two transfers in flight together (one request holds them as a prefix-cache
  hit, not a second allocation);
- a decode prefix-cache hit: decode pulls only the uncached suffix, paired with the END of
  prefill's block list (decode's blocks are pages 2.. of the request, not 0..);
- an abort while the READ is posted and unreported: vLLM keeps the blocks until the worker
  reports the READ, then frees them (and nothing reads them); an abort before scheduling
  (no READ, only the notification prefill frees on);
- a tight decode pool: freed blocks go to the next request at once.

Before the fixes in tracer/integrations/vllm.py these gave double_alloc (prefill's shared
blocks), layer_offset_mismatch (the suffix pulled into pages 0..) and slot_reuse_before_read
(the abort's free recorded at the abort, its READ reported later as a read); the attribution
called the shared pages' reads corrupted ("holds request sharedA's page 0"). Each legal run
must check clean; each buggy twin (the same workload with one real bug) must be found."""
from __future__ import annotations

import pytest

from engine_runs import check, driver, env_for, findings, need_engines, record
from kvtrace.tracer import open_trace
from vllm_facts import prefill_report

pytestmark = pytest.mark.slow
ENGINE = driver("vllm_engine_pd.py")
LAYERS = 3
# The abort in flight: the driver stops prefill's process (a stalled peer) from just before
# the READ is posted to just after the abort, and posts only once every prefill thread is
# stopped (SIGSTOP stops them one after another: vllm_engine_pd.wait_stopped). Over TCP a
# READ needs prefill's reply, so it is still in progress at the abort on any machine. Over shared memory it does not: UCX may
# finish it inside the post (NIXL says DONE there, kvtrace records the completion there),
# and then the buggy free comes after the bytes landed (a quiet box did that every run, a
# loaded one over TCP without the stall once): the bug would not have happened.
IN_FLIGHT = env_for(UCX_TLS="tcp")


def _events(trace):
    return open_trace(trace).table("events").to_pylist()


def test_vllm_engine_legal_patterns_check_clean(tmp_path):
    need_engines()
    run = record(tmp_path, ENGINE, ["--layers", str(LAYERS)], hooks="vllm", env=IN_FLIGHT)
    assert run.rc == 0, run.stderr[-3000:]
    rep = run.report
    assert rep["misaddressed"] == [], rep["misaddressed"][:4]
    assert sorted(rep["aborted"]) == ["abort-early", "abort-inflight"]
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert res["attribution"] == [], res["attribution"][:2]  # no read called corrupted
    ev = _events(run.trace)
    pre = {e["agent"] for e in ev if e["kind"] == "write"}
    allocs = [e for e in ev if e["kind"] == "alloc"]
    # the patterns happened: prefill handed sharedB sharedA's first blocks as prefix-cache hits...
    a = [e for e in allocs if e["agent"] in pre and e["request"] == "sharedA"]
    b = [e for e in allocs if e["agent"] in pre and e["request"] == "sharedB"]
    assert len(a) == 1 and len(b) == 2 and b[0]["slots"] == a[0]["slots"][:2] and '"shared"' in b[0]["detail"]
    # ...and decode READ those same source blocks with two transfers
    posts = {e["request"]: e for e in ev if e["kind"] == "xfer_post"}
    assert {"sharedA", "sharedB", "hit", "abort-inflight"} <= set(posts) and "abort-early" not in posts
    # decode's prefix-cache hit: only the suffix pulled, into the request's pages 2 and 3
    dec_hit = [e for e in allocs if e["agent"] not in pre and e["request"] == "hit"]
    assert len(dec_hit) == 1 and list(dec_hit[0]["pages"]) == [2, 3]
    descs = open_trace(run.trace).table("descs").to_pylist()
    hit = posts["hit"]
    assert sum(1 for d in descs if d["shard"] == hit["shard"] and d["xfer"] == hit["xfer"]) == 2 * LAYERS
    # the abort in flight: its blocks freed (reason abort) only after the worker reported the READ,
    # then handed to the next request at once
    dec = [e for e in ev if e["agent"] not in pre]
    i = next(k for k, e in enumerate(dec) if e["kind"] == "free" and e["request"] == "abort-inflight")
    assert '"abort"' in dec[i]["detail"]
    ab = posts["abort-inflight"]
    assert any(e["kind"] == "xfer_done" and e["xfer"] == ab["xfer"] for e in dec[:i])
    nxt = next(e for e in dec[i + 1:] if e["kind"] == "alloc")
    assert set(nxt["slots"]) & set(dec[i]["slots"])
    assert not any(e["kind"] == "read" and e["request"] == "abort-inflight" for e in ev)


# what each bug's consequences may add, by timing: the aborted READ still running when the
# next request's READ targets the freed blocks; a reused source overwritten, bytes read wrong
CONSEQUENCES = {"write_after_free": {"overlapping_inflight_writes", "slot_reuse_before_read", "checksum_mismatch"},
                "src_free_before_done": {"inflight_src_overwritten", "checksum_mismatch"}}


@pytest.mark.parametrize("bug,check_name,requests", [
    ("decode-abort-free", "write_after_free", {"abort-inflight"}),
    ("prefill-lease", "src_free_before_done", {"sharedA", "sharedB"}),
])
def test_vllm_engine_buggy_twin_found(tmp_path, bug, check_name, requests):
    """decode-abort-free: decode's engine frees an aborted request's blocks while its READ is
    posted and unreported. prefill-lease: prefill's lease runs out before decode reads the
    shared blocks (vLLM's expiry frees them)."""
    need_engines()
    run = record(tmp_path, ENGINE, ["--layers", str(LAYERS), "--bug", bug, "--timeout", "60"], hooks="vllm",
                 env=IN_FLIGHT)
    assert run.rc == 0, run.stderr[-3000:]
    if bug == "decode-abort-free":  # the bug happened: the free came before the READ's completion
        ev = _events(run.trace)
        post = next(e for e in ev if e["kind"] == "xfer_post" and e["request"] == "abort-inflight")
        same = [e for e in ev if e["shard"] == post["shard"]]
        free = next(e["seq"] for e in same if e["kind"] == "free" and e["request"] == "abort-inflight")
        done = next(e["seq"] for e in same if e["kind"] == "xfer_done" and e["xfer"] == post["xfer"])
        assert post["seq"] < free < done, (post["seq"], free, done)
    res = check(run.trace)
    got = findings(res)
    assert requests <= {f["request"] for f in got if f["check"] == check_name}, [f["message"] for f in got][:3]
    assert {f["check"] for f in got} <= {check_name} | CONSEQUENCES[check_name], [f["message"] for f in got][:3]


def test_vllm_engine_sliding_window_group_checks_clean(tmp_path):
    """A hybrid model (odd layers attend over a 64-token sliding window: a second KV cache
    group, pool kv1). vLLM hands decode only the window's blocks of that group, padded with
    its null block (block 0) where a page left the window, and decode pulls the last of them.
    Before: kvtrace numbered the tail 0.. on both sides (layer_offset_mismatch when decode
    pulled fewer than prefill listed) and recorded the null block as a page prefill held."""
    need_engines()
    run = record(tmp_path, ENGINE, ["--swa", "64", "--layers", "4", "--prefill-blocks", "48",
                                    "--decode-blocks", "24"], hooks="vllm")
    assert run.rc == 0, run.stderr[-3000:]
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert res["attribution"] == [], res["attribution"][:2]
    sw = [e for e in _events(run.trace) if e["kind"] == "alloc" and e["pool"] == "kv1"]
    assert sw and all(0 not in e["slots"] for e in sw)
    assert any(min(e["pages"]) > 0 for e in sw)   # window tails: the sequence's last pages


# vLLM's multiprocess executor (any TP > 1) runs prefill's scheduler in one process and its
# worker in another: the scheduler half has no NIXL agent to tie its blocks to, so the worker's
# process records them from the scheduler outputs the model runner's glue gets each step.
WORKER_PROCESS = ["--prefill-workers", "process"]


@pytest.mark.parametrize("role", ["kv_producer", "kv_both"])
def test_vllm_engine_worker_process_records_prefill_blocks(tmp_path, role):
    """The legal workload with prefill's worker in its own process checks clean, and prefill's
    blocks, writes, hand-offs and frees are recorded by the worker's process, as the scheduler
    half records them in one process: sharedB holds sharedA's first blocks as prefix-cache hits.
    The same with prefill's kv_role kv_both (how vLLM's NIXL docs launch both sides)."""
    need_engines()
    run = record(tmp_path, ENGINE, ["--layers", str(LAYERS), "--prefill-role", role] + WORKER_PROCESS,
                 hooks="vllm", env=IN_FLIGHT)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.report["misaddressed"] == [], run.report["misaddressed"][:4]
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert res["attribution"] == [] and not any("no allocation" in str(n) for n in res["notes"]), res["notes"]
    ev, did = _events(run.trace), prefill_report(run)
    worker = f"vllm_engine_pd-{did['worker_pid']}"
    pre = [e for e in ev if e["agent"] == did["agent"]]
    assert pre and {e["shard"] for e in pre if e["kind"] in ("alloc", "write", "free", "msg_send")} == {worker}
    reqs = {e["request"] for e in pre if e["kind"] == "write"}
    assert reqs == set(did["requests"]) and len(reqs) == 8
    a = [e for e in pre if e["kind"] == "alloc" and e["request"] == "sharedA"]
    b = [e for e in pre if e["kind"] == "alloc" and e["request"] == "sharedB"]
    assert len(a) == 1 and len(b) == 2 and b[0]["slots"] == a[0]["slots"][:2] and '"shared"' in b[0]["detail"]
    assert sorted(e["request"] for e in pre if e["kind"] == "free") == sorted(reqs)


def test_vllm_engine_worker_process_finds_the_expired_lease(tmp_path):
    """The expired lease with prefill's worker in its own process: found as in one process
    (before, prefill's blocks were not recorded there and check could only say so)."""
    need_engines()
    run = record(tmp_path, ENGINE, ["--layers", str(LAYERS), "--bug", "prefill-lease", "--timeout", "60"]
                 + WORKER_PROCESS, hooks="vllm", env=IN_FLIGHT)
    assert run.rc == 0, run.stderr[-3000:]
    got = findings(check(run.trace))
    assert {"sharedA", "sharedB"} <= {f["request"] for f in got if f["check"] == "src_free_before_done"}, \
        [f["message"] for f in got][:3]
    assert {f["check"] for f in got} <= {"src_free_before_done"} | CONSEQUENCES["src_free_before_done"]
