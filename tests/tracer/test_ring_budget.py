"""The ring's memory budget (issue 20, "memory never above the ring size"): SIZE is charged
with the ring's own working memory before any batch is kept, the process's rings share one
SIZE, and a SIZE too small for that is refused with the minimum stated."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from kvtrace.errors import KvtraceError
from kvtrace.tracer import ring_budget
from kvtrace.tracer.ring import RingRecorder, check_ring, parse_ring
from kvtrace.tracer.ring_budget import MiB, RingBudget, RingSizeError
from kvtrace.tracer.ring_store import RingStore
from kvtrace.tracer.schema import EVENTS


def _requests(r0: int, n: int, t0: int, agent: str = "a", pad: int = 300) -> pa.RecordBatch:
    """``n`` whole requests (start, alloc of a slot, writes, free, done): liveness
    bookkeeping grows with them, and each stays pinned for the slack after it is done."""
    rows, seq = [], r0 * 8
    for r in range(r0, r0 + n):
        req, slot = f"req-{r}", r % 64
        for kind, extra in (("req_start", {}), ("alloc", {"pool": "kv", "slots": [slot]}),
                            ("write", {"pool": "kv", "slots": [slot], "detail": "w" * pad}),
                            ("write", {"pool": "kv", "slots": [slot], "detail": "w" * pad}),
                            ("free", {"pool": "kv", "slots": [slot]}), ("req_done", {})):
            rows.append({"seq": seq, "t_ns": t0 + seq, "agent": agent, "kind": kind, "request": req, **extra})
            seq += 1
    return pa.RecordBatch.from_pylist(rows, schema=EVENTS)


def _feed(stores, flushes: int, per_flush: int, slack_t: int = 1000):
    """Flush ``per_flush`` requests into each store in turn; the most the budget committed."""
    peak = 0
    for k in range(flushes):
        for i, st in enumerate(stores):
            r0 = (k * len(stores) + i) * per_flush
            st.add("events", _requests(r0, per_flush, k * slack_t * 10))
            st.evict(k * slack_t * 10 + slack_t)
            peak = max(peak, st.budget.committed())
    return peak


@pytest.mark.parametrize("process_reserve,shard_reserve", [(0, 0), (300_000, 100_000)])
def test_committed_bytes_never_exceed_size_under_eviction(process_reserve, shard_reserve):
    """Two rings of one process share SIZE: after every flush, the reserves plus each
    ring's batches and working bytes (bookkeeping, transient batch) are within SIZE, while
    the rings keep batches and evict."""
    size = 2_000_000
    budget = RingBudget(size, process_reserve=process_reserve, shard_reserve=shard_reserve)
    stores = [RingStore(slack_ns=1000, budget=budget) for _ in range(2)]
    peak = _feed(stores, 60, 20)
    assert peak <= size
    assert all(st.evicted_events > 0 and st.chunks for st in stores)      # a real ring, not empty
    assert all(st.working_bytes > 0 for st in stores)                     # and its costs were charged
    # the reserve is charged: what the batches may hold shrinks by it
    assert all(st.nbytes <= (size - process_reserve) // 2 - shard_reserve - st.working_bytes for st in stores)


def test_reserve_leaves_the_batches_less_room():
    """The twin without reserves holds more: the fixed working set comes out of SIZE."""
    held = []
    for reserve in (0, 600_000):
        budget = RingBudget(2_000_000, process_reserve=reserve, shard_reserve=0)
        st = RingStore(slack_ns=1000, budget=budget)
        _feed([st], 60, 20)
        held.append(st.nbytes)
    assert held[1] < held[0] - 300_000


def test_a_ring_joining_a_full_budget_never_overcommits():
    """A second ring joining while the first fills the whole SIZE gets only what is free
    until the first shrinks to its share at its next flush."""
    size = 2_000_000
    budget = RingBudget(size, process_reserve=200_000, shard_reserve=50_000)
    first = RingStore(slack_ns=1000, budget=budget)
    _feed([first], 30, 20)
    assert first.nbytes > (size - 200_000) // 2       # more than a half share: it was alone
    second = RingStore(slack_ns=1000, budget=budget)
    assert budget.allowance(second) < (size - 200_000) // 2 - 50_000
    assert _feed([second, first], 30, 20) <= size


def test_a_flush_larger_than_the_room_is_dropped_and_said():
    """A flush bigger than everything the budget leaves is not kept (the bound holds); the
    dump's window says its events were lost."""
    budget = RingBudget(400_000, process_reserve=100_000, shard_reserve=0)
    st = RingStore(slack_ns=1000, budget=budget)
    st.add("events", _requests(0, 5, 0))
    st.add("events", _requests(5, 400, 10_000, pad=600))     # ~0.5 MB of Arrow: over everything
    assert budget.committed() <= 400_000
    assert st.overflow_events == 400 * 6
    _, window = st.snapshot(0)
    assert window["overflow_events"] == 400 * 6 and window["state_complete"] is False


@pytest.mark.parametrize("spec,expect", [("30s,64MB", (64 << 20, 30.0)), ("64MB,2min", (64 << 20, 120.0))])
def test_parse_ring_both_bounds(spec, expect):
    assert parse_ring(spec) == expect


@pytest.mark.parametrize("spec", ["30s,1min", "64MB,1GB", "30s,64MB,1GB", "30s,"])
def test_parse_ring_both_bounds_rejects(spec):
    with pytest.raises(ValueError):
        parse_ring(spec)


def test_too_small_is_a_domain_error_stating_the_minimum(tmp_path):
    """The API refuses a SIZE below the ring's own working memory, saying the minimum;
    two rings of one process need more than one."""
    one, two = ring_budget.minimum(1), ring_budget.minimum(2)
    assert one < two
    with pytest.raises(RingSizeError) as e:
        RingRecorder(str(tmp_path / "s.kvtrace"), "a", ring="4MB", signals=False)
    assert isinstance(e.value, KvtraceError) and f"at least {one // MiB}MB" in str(e.value)
    assert "\n" not in str(e.value)
    spec = f"{one // MiB}MB"                 # enough for one ring, not for two
    first = RingRecorder(str(tmp_path / "t.kvtrace"), "a", ring=spec, signals=False)
    try:
        with pytest.raises(RingSizeError, match=f"at least {two // MiB}MB"):
            RingRecorder(str(tmp_path / "t.kvtrace"), "b", ring=spec, signals=False)
    finally:
        first.close()
    with pytest.raises(RingSizeError):
        check_ring(spec, shards=2)
    check_ring(f"{two // MiB}MB", shards=2)


def test_duration_ring_has_a_memory_ceiling(tmp_path):
    """A DURATION ring is bounded in memory too: the default ceiling, or the size given."""
    rec = RingRecorder(str(tmp_path / "s.kvtrace"), "a", ring="30s", signals=False)
    rec2 = RingRecorder(str(tmp_path / "u.kvtrace"), "a", ring="30s,64MB", signals=False)
    try:
        assert rec.store.budget.size == ring_budget.DEFAULT_CEILING and rec.store.window_ns == 30 * 10**9
        assert rec2.store.budget.size == 64 * MiB and rec2.store.window_ns == 30 * 10**9
    finally:
        rec.close()
        rec2.close()
    assert rec.store.budget.stores == 0          # closing gives the budget back


def test_rings_of_one_session_share_one_size(tmp_path):
    """One SIZE per process: the rings of one session in a process share one budget."""
    session = str(tmp_path / "s.kvtrace")
    recs = [RingRecorder(session, name, ring="32MB", signals=False) for name in ("prefill", "decode")]
    try:
        assert recs[0].store.budget is recs[1].store.budget and recs[0].store.budget.size == 32 * MiB
        assert recs[0].store.budget.stores == 2
    finally:
        for r in recs:
            r.close()


@pytest.mark.parametrize("args,shards", [(["--ring", "4MB"], 2), (["--processes", "2", "--ring", "4MB"], 1),
                                         (["--ring", "4MB", "--", "true"], 1)])
def test_cli_refuses_too_small_one_line_exit_2(tmp_path, capsys, args, shards):
    """`kvtrace record --ring SIZE` below the minimum: one line naming the minimum for the
    process's rings (two for the reference engine in one process), exit 2, nothing made."""
    from kvtrace.cli import main
    out = tmp_path / "s.kvtrace"
    cmd = ["record", "-o", str(out)] + args
    rc = main(cmd)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "--ring 4MB" in err[0] and f"at least {ring_budget.minimum(shards) // MiB}MB" in err[0]
    assert not os.path.exists(out)


def test_engine_api_refuses_before_recording(tmp_path):
    """The reference engine's API (two rings in one process) refuses a SIZE fit for one ring
    only, before it records anything."""
    from kvtrace.tracer.engine.runner import run_inprocess
    from kvtrace.tracer.engine.workload import load
    one = f"{ring_budget.minimum(1) // MiB}MB"
    out = tmp_path / "s.kvtrace"
    with pytest.raises(RingSizeError, match=f"at least {ring_budget.minimum(2) // MiB}MB"):
        run_inprocess(load("small", requests=2), (), str(out), ring=one)
    assert not out.exists()


@pytest.mark.parametrize("spec, says", [("1MB", "at least 8MB"), ("lots", "lots")])
def test_bad_ring_env_set_by_hand_records_nothing_and_says_so_once(tmp_path, spec, says):
    """$KVTRACE_RING set by hand (not through `kvtrace record`, which checks it first): the
    traced program keeps running untraced, with one line on stderr, never a traceback."""
    import subprocess
    import sys
    probe = ("from kvtrace.tracer.process_recorder import default_recorder\n"
             "print(default_recorder(), default_recorder())\n")
    env = dict(os.environ, KVTRACE_TRACE_DIR=str(tmp_path / "t.kvtrace"), KVTRACE_RING=spec)
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "None None"
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kvtrace: not recording process") and says in err[0], r.stderr
