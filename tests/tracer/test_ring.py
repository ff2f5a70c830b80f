"""Flight recorder (issue 20): a bounded ring per process, dumped on a trigger as a trace
that validates and checks without false findings from its window's start."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.tracer import ring as ring_mod
from kvtrace.tracer.engine.runner import run_inprocess
from kvtrace.tracer.engine.workload import load
from kvtrace.tracer.ring import RingRecorder, parse_ring
from kvtrace.tracer.ring_dump import dump_path
from kvtrace.tracer.ring_store import RingStore
from kvtrace.tracer.schema import EVENTS


@pytest.mark.parametrize("spec,expect", [("256MB", (256 << 20, None)), ("1gb", (1 << 30, None)),
                                         ("30s", (None, 30.0)), ("2min", (None, 120.0)), ("500ms", (None, 0.5))])
def test_parse_ring(spec, expect):
    assert parse_ring(spec) == expect


@pytest.mark.parametrize("spec", ["30m", "abc", "10KB-", "0s", "1KB"])
def test_parse_ring_rejects(spec):
    with pytest.raises(ValueError):
        parse_ring(spec)


def _events(seq0: int, n: int, t0: int) -> pa.RecordBatch:
    rows = [{"seq": seq0 + i, "t_ns": t0 + i, "agent": "a", "kind": "mark", "detail": "x" * 200} for i in range(n)]
    return pa.RecordBatch.from_pylist(rows, schema=EVENTS)


def test_store_stays_under_its_size():
    """Unpinned facts leave the ring once it is over size; the newest chunk always stays."""
    store = RingStore(max_bytes=200_000, window_ns=None, slack_ns=0)
    peak = 0
    for k in range(200):
        store.add("events", _events(k * 100, 100, k * 1000))
        store.evict(k * 1000 + 999)
        peak = max(peak, store.nbytes)
    assert peak <= 200_000 + _events(0, 100, 0).nbytes
    assert store.evicted_events > 15_000
    tables, window = store.snapshot(store.from_ns)
    seqs = pa.concat_arrays([b.column("seq") for b in tables["events"]]).to_pylist()
    assert seqs == sorted(seqs) and seqs[-1] == 19_999 and window["from_seq"] == seqs[0]


def _findings(trace: str) -> set[tuple[str, str]]:
    with TraceSession(trace) as s:
        return {(f.check, f.request) for f in s.findings()}


def _ring_run(tmp_path, name: str, bugs=(), after: int = 0, trigger_step: int | None = None):
    wl = load("small", requests=400)
    if after:
        wl.engine["inject_after"] = after

    def on_step(done, total, state={"k": 0}):
        state["k"] += 1
        if state["k"] == trigger_step:
            ring_mod.trigger("test: step reached")
    session = str(tmp_path / f"{name}.kvtrace")
    run_inprocess(wl, bugs, session, on_step=on_step if trigger_step else None, ring="0.4s")
    return session


@pytest.mark.slow
def test_late_bug_dump_holds_the_corrupting_transfer(tmp_path, validate_trace):
    """The engine's checksum-mismatch hook dumps a 0.4 s window long after the run began;
    the dump validates, holds the transfer whose source was freed early, and every
    finding in it is one the full recording of the same run also has."""
    session = _ring_run(tmp_path, "late", ("early-src-free",), after=350)
    dump = dump_path(session, 1)
    validate_trace(dump)
    man = json.load(open(os.path.join(dump, "manifest.json")))
    assert man["complete"] and man["trigger"]["reason"].startswith("checksum mismatch")
    windows = [json.load(open(os.path.join(dump, s, "shard.json")))["ring"]["window"] for s in man["shards"]]
    assert all(w["evicted_events"] > 0 and w["pinned_events"] > 0 for w in windows)  # a real cut
    found = _findings(dump)
    assert any(c == "src_free_before_done" for c, _ in found)
    full = str(tmp_path / "full.kvtrace")
    wl = load("small", requests=400)
    wl.engine["inject_after"] = 350
    run_inprocess(wl, ("early-src-free",), full)
    assert found <= _findings(full)


@pytest.mark.slow
def test_clean_dump_has_no_finding(tmp_path, validate_trace):
    """Clean twin: the same session dumped by the Python API mid-run finds nothing."""
    session = _ring_run(tmp_path, "clean", trigger_step=600)
    dump = dump_path(session, 1)
    validate_trace(dump)
    w = json.load(open(os.path.join(dump, "decode", "shard.json")))["ring"]["window"]
    assert w["evicted_events"] > 0
    assert _findings(dump) == set()


def test_sigusr1_dumps_every_recorder(tmp_path):
    """SIGUSR1 (kvtrace dump PID) reaches both shards of an in-process session."""
    import signal
    session = str(tmp_path / "s.kvtrace")
    recs = [RingRecorder(session, name, ring="1MB", flush_interval=0.05) for name in ("a", "b")]
    try:
        for r in recs:
            r.mark("hello", agent=r.shard)
        os.kill(os.getpid(), signal.SIGUSR1)
        for r in recs:
            r.flush()
        for r in recs:
            r.flush()
    finally:
        for r in recs:
            r.close()
    dump = dump_path(session, 1)
    man = json.load(open(os.path.join(dump, "manifest.json")))
    assert sorted(man["shards"]) == ["a", "b"] and man["complete"]
    assert man["trigger"]["reason"] == "signal SIGUSR1"
