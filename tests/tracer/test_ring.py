"""Flight recorder (issue 20): a bounded ring per process, dumped on a trigger as a trace
that validates and checks without false findings from its window's start."""
from __future__ import annotations

import json
import os
import time

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


@pytest.mark.parametrize("spec,expect", [(None, ring_mod.DEFAULT_TAIL_S), ("2", 2.0), ("1.5s", 1.5), ("500ms", 0.5),
                                         ("0s", 0.0), ("1min", 60.0)])
def test_parse_tail(spec, expect):
    assert ring_mod.parse_tail(spec) == expect


def test_bad_ring_tail_is_one_line_and_exit_2(tmp_path, capsys):
    from kvtrace.cli import main
    rc = main(["record", "--ring", "1s", "--ring-tail", "abc", "-o", str(tmp_path / "s.kvtrace"), "--", "true"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--ring-tail abc" in err[0], err


def _events(seq0: int, n: int, t0: int) -> pa.RecordBatch:
    rows = [{"seq": seq0 + i, "t_ns": t0 + i, "agent": "a", "kind": "mark", "detail": "x" * 200} for i in range(n)]
    return pa.RecordBatch.from_pylist(rows, schema=EVENTS)


def test_store_stays_under_its_size():
    """Unpinned facts leave the ring before it would go over its size; the newest chunk stays."""
    store = RingStore(max_bytes=200_000, window_ns=None, slack_ns=0)
    peak = 0
    for k in range(200):
        store.add("events", _events(k * 100, 100, k * 1000))
        store.evict(k * 1000 + 999)
        peak = max(peak, store.nbytes)
    assert peak <= 200_000       # room is made before a chunk is added
    assert store.evicted_events > 15_000
    tables, window = store.snapshot(store.from_ns)
    seqs = pa.concat_arrays([b.column("seq") for b in tables["events"]]).to_pylist()
    assert seqs == sorted(seqs) and seqs[-1] == 19_999 and window["from_seq"] == seqs[0]


def _findings(trace: str) -> set[tuple[str, str]]:
    with TraceSession(trace) as s:
        return {(f.check, f.request) for f in s.findings()}


#: the ring's window in these runs, and how long a run goes before a test's trigger: several
#: windows and flush intervals, so the window's start always cuts the run (the engine can
#: reach a given step in half a second on a fast machine)
RING, TRIGGER_AFTER_S = "0.4s", 1.2


def _ring_run(tmp_path, name: str, bugs=(), after: int = 0, trigger_step: int | None = None, requests: int = 400):
    wl = load("small", requests=requests)
    if after:
        wl.engine["inject_after"] = after
    state = {"k": 0, "t0": None, "fired": False}

    def on_step(done, total):
        state["k"] += 1
        state["t0"] = state["t0"] or time.monotonic()
        if not state["fired"] and state["k"] >= trigger_step and time.monotonic() - state["t0"] >= TRIGGER_AFTER_S:
            state["fired"] = True
            ring_mod.trigger("test: step reached")
    session = str(tmp_path / f"{name}.kvtrace")
    run_inprocess(wl, bugs, session, on_step=on_step if trigger_step else None, ring=RING)
    assert not trigger_step or state["fired"], f"the run ended before its trigger ({state['k']} steps)"
    return session


@pytest.mark.slow
def test_late_bug_dump_holds_the_corrupting_transfer(tmp_path, validate_trace, monkeypatch):
    """The engine's checksum-mismatch hook dumps a 0.4 s window long after the run began;
    the dump validates, holds the transfer whose source was freed early, and every
    finding in it is one the full recording of the same run also has.

    The window's tail outlasts the run (each shard then dumps at close), so prefill's
    completion of the corrupting transfer, which can come after decode's trigger, is in
    the dump by construction, not by timing."""
    monkeypatch.setenv(ring_mod.ENV_RING_TAIL, "600s")
    # a real cut whatever the machine's speed: the rings evict at each flush, so they flush
    # often here and the bug comes late enough that far more than the window ran before it
    # (on a quiet machine 350 requests took ~0.6 s: the first 0.5 s flush had evicted nothing)
    monkeypatch.setattr(ring_mod, "FLUSH_S", 0.05)
    session = _ring_run(tmp_path, "late", ("early-src-free",), after=700, requests=800)
    dump = dump_path(session, 1)
    validate_trace(dump)
    man = json.load(open(os.path.join(dump, "manifest.json")))
    assert man["complete"] and man["trigger"]["reason"].startswith("checksum mismatch")
    windows = [json.load(open(os.path.join(dump, s, "shard.json")))["ring"]["window"] for s in man["shards"]]
    assert all(w["evicted_events"] > 0 and w["pinned_events"] > 0 for w in windows)  # a real cut
    assert all(w["to_unix"] > man["trigger"]["unix"] for w in windows)   # the tail is in
    found = _findings(dump)
    if not any(c == "src_free_before_done" for c, _ in found):   # say what the dump held and why
        rows = {s: json.load(open(os.path.join(dump, s, "shard.json"))).get("events") for s in man["shards"]}
        with TraceSession(dump) as s:
            s.findings()
            notes = s.notes
        raise AssertionError(f"no src_free_before_done in the dump: {sorted(found)[:20]} {windows} "
                             f"{man['trigger']} {rows} {notes}")
    full = str(tmp_path / "full.kvtrace")
    wl = load("small", requests=800)
    wl.engine["inject_after"] = 700
    run_inprocess(wl, ("early-src-free",), full)
    assert found <= _findings(full)


@pytest.mark.slow
@pytest.mark.parametrize("step", [450, 700])
def test_clean_dump_has_no_finding(tmp_path, validate_trace, step):
    """Clean twin: the same session dumped by the Python API mid-run finds nothing, wherever
    the window starts (prefix pages shared across turns, transfers spanning the start).
    The trigger comes at the given step, but never before TRIGGER_AFTER_S of running."""
    session = _ring_run(tmp_path, "clean", trigger_step=step, requests=1000)
    dump = dump_path(session, 1)
    validate_trace(dump)
    w = json.load(open(os.path.join(dump, "decode", "shard.json")))["ring"]["window"]
    # a real cut: the window starts after the run's first event. Not "evicted_events > 0":
    # how many early facts are dropped rather than carried (pinned) depends on which
    # requests sharing prefix pages are still live at the cut, i.e. on the schedule.
    assert w["from_seq"] is not None and w["from_seq"] > 0
    assert w["evicted_events"] + w["pinned_events"] > 0
    assert _findings(dump) == set()


def test_sigusr1_dumps_every_recorder(tmp_path):
    """SIGUSR1 (kvtrace dump PID) reaches both shards of an in-process session."""
    import signal
    session = str(tmp_path / "s.kvtrace")
    recs = [RingRecorder(session, name, ring="16MB", flush_interval=0.05) for name in ("a", "b")]
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


PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")


def _env():
    env = dict(os.environ)
    for k in ("KVTRACE_TRACE_DIR", "KVTRACE_RING"):
        env.pop(k, None)
    env["NIXL_LOG_LEVEL"] = "WARN"
    return env


@pytest.mark.timeout(120)
def test_record_cmd_ring_dumps_on_nixl_error(tmp_path, validate_trace):
    """`record --ring -- CMD`: nothing is written while the program runs clean; a transfer
    ending in ERR (peer destroyed mid-transfer) triggers a dump holding the failed transfer.
    If the transfer beats the teardown (DONE), there is no trigger and no dump."""
    import subprocess
    import sys
    env = _env()
    env["UCX_TLS"] = "tcp"
    out = tmp_path / "err.kvtrace"
    r = subprocess.run([sys.executable, "-m", "kvtrace", "record", "--ring", "8MB", "-o", str(out), "--",
                        sys.executable, os.path.join(PROGRAMS, "err_inflight.py")],
                       capture_output=True, text=True, env=env, timeout=100)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if " UCX " not in ln]
    dump = dump_path(str(out), 1)
    assert not [d for d in os.listdir(out) if (out / d).is_dir() and not d.startswith(("_", "."))]  # no shard
    if lines[1] == "state DONE":
        assert not os.path.exists(dump)
        return
    validate_trace(dump)
    from kvtrace.tracer import open_trace
    kinds = [e["kind"] for e in open_trace(dump).table("events").to_pylist()]
    assert "xfer_post" in kinds and "xfer_error" in kinds
    man = json.load(open(os.path.join(dump, "manifest.json")))
    assert man["trigger"]["reason"].startswith("NIXL error state")


def test_dump_cli_bad_input(tmp_path):
    import subprocess
    import sys
    for target in (str(tmp_path), "999999999"):
        r = subprocess.run([sys.executable, "-m", "kvtrace", "dump", target], capture_output=True, text=True,
                           timeout=60, env=_env())
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dump_session_reaches_both_processes(tmp_path, validate_trace):
    """`kvtrace dump SESSION` while the engine runs prefill and decode as two OS processes:
    both write the same window (same from_unix) and the dump checks clean."""
    import subprocess
    import sys
    import time
    from kvtrace.tracer.ring_dump import live_shards, read_live
    toml = tmp_path / "long.toml"
    toml.write_text('name = "long"\nrequests = 400\nconcurrency = 4\n')
    session = tmp_path / "s.kvtrace"
    proc = subprocess.Popen([sys.executable, "-m", "kvtrace", "record", "--ring", "2s", "--processes", "2",
                             "--workload", str(toml), "--no-progress", "-o", str(session)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        deadline = time.monotonic() + 120
        decode_live = session / "_ring" / "decode" / "live.jsonl"
        while time.monotonic() < deadline:   # both processes recording, and requests under way
            if len(live_shards(str(session))) == 2 and decode_live.exists() and \
                    read_live(str(session), "prefill", {})[0]:
                break
            assert proc.poll() is None, "the engine ended before it could be dumped"
            time.sleep(0.1)
        r = subprocess.run([sys.executable, "-m", "kvtrace", "dump", str(session)], capture_output=True,
                           text=True, timeout=60, env=_env())
        assert r.returncode == 0, r.stderr
        dump = r.stdout.strip()
        assert dump == dump_path(str(session), 1)
    finally:
        proc.wait(timeout=240)
    validate_trace(dump)
    man = json.load(open(os.path.join(dump, "manifest.json")))
    assert sorted(man["shards"]) == ["decode", "prefill"] and man["complete"]
    starts = {json.load(open(os.path.join(dump, s, "shard.json")))["ring"]["window"]["from_unix"] for s in man["shards"]}
    assert len(starts) == 1
    assert _findings(dump) == set()


def test_ring_flush_interval_default(tmp_path):
    """A ring flushes every ring.FLUSH_S unless told (at most a quarter of its slack); a given
    interval is kept; `record -- CMD` uses the same interval."""
    from kvtrace.tracer import process_recorder
    assert process_recorder.RING_FLUSH_S == ring_mod.FLUSH_S
    for ring, kw, want in (("30s", {}, ring_mod.FLUSH_S), ("2s", {}, 0.25), ("30s", {"flush_interval": 0.05}, 0.05)):
        rec = RingRecorder(str(tmp_path / f"s{ring}{len(kw)}.kvtrace"), "a", ring=ring, signals=False, **kw)
        try:
            assert rec.flush_interval == want
        finally:
            rec.close()


def test_dump_carries_untraced_postings_not_event_losses(tmp_path):
    """Postings NIXL ran that the ring's recorder could not record reach the dump's shard.json
    (the analysis then calls no page of the window undelivered); the twin without them has none."""
    from kvtrace.model.cut import untraced_postings
    from kvtrace.tracer import open_trace

    for n in (2, 0):
        session = str(tmp_path / f"u{n}.kvtrace")
        rec = RingRecorder(session, "a", ring="16MB", flush_interval=0.05)
        try:
            rec.mark("hello", agent="a")
            for _ in range(n):
                rec.untraced("descriptor list prepared before tracing started")
            out = rec.dump_now("test")
        finally:
            rec.close()
        info = json.load(open(os.path.join(out, "a", "shard.json")))
        assert info.get("untraced_postings", {}) == ({"descriptor list prepared before tracing started": n} if n else {})
        assert "lost" not in info
        shard = open_trace(out).shards[0]
        assert sum(untraced_postings(shard).values()) == n


def _small_ring_run(tmp_path, name: str, bugs=(), after: int = 0, trigger_step: int | None = None) -> str:
    """The reference engine under an 11MB ring (the minimum for its two rings): over 900
    requests the kept facts outgrow it and a dump's window start is a plain cut."""
    wl = load("small", requests=900)
    if after:
        wl.engine["inject_after"] = after
    state = {"k": 0}

    def on_step(done, total):
        state["k"] += 1
        if trigger_step is not None and state["k"] == trigger_step:
            ring_mod.trigger("test: step reached")
    session = str(tmp_path / f"{name}.kvtrace")
    run_inprocess(wl, bugs, session, on_step=on_step, ring="11MB")
    return session


@pytest.mark.slow
def test_dump_whose_kept_state_was_dropped_is_checked_soundly(tmp_path, validate_trace, monkeypatch):
    """Regression: a dump with ``state_complete: false`` read its start gap as a lost tail
    (a receive whose send was evicted cut the receiver before it, and the closure cut the
    other shard), so the whole window went unanalysed; with the windows' own facts checked
    naively it found double frees and descriptors into slots not held instead. Now the
    requests started inside the window are checked: the late bug is found, every finding is
    one the full recording of the same workload has, and the clean twin finds nothing.
    (The two recordings are separate runs of one seeded workload: top-level findings are
    compared, as in test_late_bug_dump_holds_the_corrupting_transfer.)"""
    monkeypatch.setenv(ring_mod.ENV_RING_TAIL, "600s")
    monkeypatch.setattr(ring_mod, "FLUSH_S", 0.05)
    for bugs, name in ((("early-src-free",), "late"), ((), "clean")):
        session = _small_ring_run(tmp_path, name, bugs, after=700 if bugs else 0, trigger_step=None if bugs else 600)
        dump = dump_path(session, 1)
        validate_trace(dump)
        man = json.load(open(os.path.join(dump, "manifest.json")))
        windows = {s: json.load(open(os.path.join(dump, s, "shard.json")))["ring"]["window"] for s in man["shards"]}
        assert any(w["state_complete"] is False for w in windows.values()), windows
        with TraceSession(dump) as s:
            found = {(f.check, f.request) for f in s.findings()}
            v = s.verdict()
            analysed = dict(s.execute("SELECT shard, max(seq) FROM events GROUP BY shard").fetchall())
            assert any("ring window whose kept state was dropped" in u.what for u in s.unknowns)
        # the window is analysed, not cut away at its start
        assert all(analysed.get(sh, -1) >= w["from_seq"] for sh, w in windows.items()), (analysed, windows)
        assert all(h.status != "ruled out" for h in v.hypotheses)
        if not bugs:
            assert found == set()
            continue
        assert any(c == "src_free_before_done" for c, _ in found)
        full = str(tmp_path / "full.kvtrace")
        wl = load("small", requests=900)
        wl.engine["inject_after"] = 700
        run_inprocess(wl, bugs, full)
        assert found <= _findings(full)


def test_close_during_a_flush_still_dumps_every_row(tmp_path, monkeypatch):
    """close() arriving while the flush thread is past moving its rows (a row recorded just
    after, or held back behind a hash) must not let that flush write the window without the
    row: the close's final flush writes it. The race is made deterministic by closing from
    inside the flush, right after the rows moved."""
    from kvtrace.tracer import open_trace
    from kvtrace.tracer.recorder import Recorder

    session = str(tmp_path / "s.kvtrace")
    rec = RingRecorder(session, "a", ring="16MB", flush_interval=60, tail_s=600, signals=False)
    moved = Recorder.flush
    state = {"armed": False}

    def flush_then_close_arrives(self):
        moved(self)
        if self is rec and state["armed"]:
            state["armed"] = False
            self.mark("recorded after the flush thread moved its rows", agent="a")
            self._stop = True            # what close() does first
    monkeypatch.setattr(Recorder, "flush", flush_then_close_arrives)
    try:
        rec.mark("before the trigger", agent="a")
        rec.trigger("test")
        state["armed"] = True
        rec.flush()                      # the flush thread's flush, interrupted by the close
        assert not rec.dumps             # not written from a flush that began before the close
    finally:
        rec.close()
    assert len(rec.dumps) == 1
    events = open_trace(rec.dumps[0]).table("events")
    texts = [json.loads(d)["text"] for k, d in zip(events.column("kind").to_pylist(),
                                                    events.column("detail").to_pylist()) if k == "mark"]
    assert texts == ["before the trigger", "recorded after the flush thread moved its rows"]


def test_a_dump_is_described_as_a_window_not_a_crash(tmp_path):
    """A dump's shards are unclosed and their seqs jump by design: the notes say it is a
    flight-recorder window (with the trigger) and how to see past its end, never that the
    process stopped or lost events; the checks that need a whole run still do not run.
    Twin: the same recorder killed before close (no ring) still reads as a crash."""
    from kvtrace.tracer import open_trace

    session = str(tmp_path / "s.kvtrace")
    rec = RingRecorder(session, "a", ring="16MB", flush_interval=0.05, signals=False)
    try:
        for i in range(3):
            rec.mark(f"m{i}", agent="a")
        out = rec.dump_now("operator asked")
    finally:
        rec.close()
    notes = open_trace(out).notes
    assert any("flight-recorder window (dumped on: operator asked)" in n for n in notes), notes
    assert not any("process stopped" in n or "events missing" in n for n in notes), notes
    with TraceSession(out) as s:
        s.findings()
        assert any("--ring-tail" in n for n in s.notes), s.notes
        assert not any("exit normally" in n for n in s.notes), s.notes
        assert "leak" in {name for name, _ in s.checks_skipped}

    from kvtrace.tracer.recorder import Recorder
    crashed = str(tmp_path / "c.kvtrace")
    plain = Recorder(crashed, "a", flush_interval=0.05)
    plain.mark("m", agent="a")
    plain.flush()      # on disk, never closed: what a kill -9 leaves
    notes = open_trace(crashed).notes
    assert any("not closed (the process stopped" in n for n in notes), notes
    plain.close()
