"""kvtrace watch (issue 20): a new finding is reported at the first poll after its facts
are below the live time frontier (every process's events up to there are written), the
checks re-run only when the trace grew or the frontier can move, and what watch reported
by the end of a recording is what `check` finds on the finished trace. The clocks are
injected: no sleeps, no timed assertions."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kvtrace.analysis.live_session import LiveCheck
from kvtrace.analysis.watch import Watcher, identity
from kvtrace.tracer.recorder import Recorder

S = 1_000_000_000   # ns per second


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("early", [True, False], ids=["emitted", "returned"])
@pytest.mark.parametrize("bug", [True, False], ids=["double-free", "clean-twin"])
def test_watch_reports_a_hazard_once_every_process_has_written_past_it(tmp_path, bug, early):
    """Two live shards; decode's events at 1.0-1.2 s, prefill's at 1.0 and 1.4 s (their
    monotonic clock, injected as the recorders' timestamps and as the watcher's now).
    ``early``: the findings are handed out while the re-check runs (poll's emit, as
    `kvtrace watch` prints them), else returned when it ends."""
    path = str(tmp_path / "live.kvtrace")
    now = [0]
    clock = lambda: now[0] / S  # noqa: E731  (the watcher's clock: the same fake time)
    w = Watcher(path, clock, check=LiveCheck(now_ns=lambda: now[0]))
    plain_poll = w.poll

    def poll():
        if not early:
            return plain_poll()
        emitted = []
        returned = plain_poll(emit=emitted.append)
        assert returned == []        # a consistent snapshot: every finding is handed out early
        return emitted
    w.poll = poll
    assert w.poll() == []                          # nothing written yet
    # the default flush interval (0.2 s, in shard.json): a shard that wrote nothing for 0.5 s has nothing older
    dec = Recorder(path, "decode", flush_interval=0.2)
    pre = Recorder(path, "prefill", flush_interval=0.2)
    try:
        dec.event("alloc", "decode", "r1", pool="kv", slots=[1, 2], t_ns=S)
        dec.event("free", "decode", "r1", pool="kv", slots=[1, 2], t_ns=S + S // 10)
        if bug:
            dec.event("free", "decode", "r1", pool="kv", slots=[2], t_ns=S + 2 * S // 10)   # a double free
        dec.flush()
        pre.event("mark", None, detail={"text": "prefill up"}, t_ns=S)
        pre.flush()
        now[0] = S + 25 * S // 100                     # 1.25 s: prefill may still hold events from after 1.0 s
        assert w.poll() == [] and w.checks_run == 1
        assert w.check.consistent and w.check.behind   # decode's events lie past the frontier (0.9 s)
        pre.event("mark", None, detail={"text": "busy"}, t_ns=S + 4 * S // 10)
        pre.flush()
        now[0] = S + 45 * S // 100                     # frontier 1.1 s: alloc and first free only
        assert w.poll() == [] and w.checks_run == 2
        now[0] = S + 85 * S // 100                     # nothing written since: frontier 1.85 - 0.5 - 0.1 s
        reports = w.poll()                              # nothing grew, but the frontier moved: re-checked
        assert w.checks_run == 3
        if bug:
            assert [r.finding.check for r in reports] == ["double_free"]
            assert reports[0].seen_at - 1.2 <= 1.0      # 0.65 s after the double free was written
        else:
            assert reports == []
        now[0] = 2 * S                                  # frontier 1.4 s: every written event is analysed
        assert w.poll() == [] and w.checks_run == 4 and not w.check.behind
        assert w.poll() == [] and w.checks_run == 4    # nothing grew, nothing behind: no re-check
        if bug:
            dec.event("free", "decode", "r1", pool="kv", slots=[2], t_ns=2 * S)   # the same root cause again
            dec.flush()
            now[0] = 3 * S
            assert w.poll() == [] and w.checks_run == 5    # not reported twice
    finally:
        w.close()
        dec.close()
        pre.close()


def test_a_writer_that_flushes_seldom_holds_the_frontier_back(tmp_path):
    """A recorder that flushes every 10 s (shard.json says so) may hold 10 s old events:
    the frontier waits for it twice that long, not 0.5 s."""
    from kvtrace.model.live import LiveModel
    path = str(tmp_path / "slow.kvtrace")
    now = [2 * S]
    rec = Recorder(path, "decode", flush_interval=10)
    try:
        rec.event("alloc", "decode", "r1", pool="kv", slots=[1], t_ns=S)
        rec.flush()
        m = LiveModel(path, now_ns=lambda: now[0])
        try:
            assert m.frontier == S - S // 10 and m.behind          # its last event, less the skew
            now[0] = 12 * S
            m.refresh()
            assert m.frontier == S - S // 10                       # 11 s quiet is not enough
            assert not m.changed                                   # the same cut: everything kept
            now[0] = 22 * S
            m.refresh()
            assert m.frontier > S and not m.behind and m.changed
        finally:
            m.close()
    finally:
        rec.close()


def test_watch_settles_findings_of_an_inconsistent_snapshot(tmp_path):
    """A check that cannot cut at a time frontier (no ``consistent``): a finding is
    reported once it is still found settle_s after the snapshot that first showed it."""
    from kvtrace.analysis.findings import Finding
    path = str(tmp_path / "t.kvtrace")
    clock = FakeClock()
    f = Finding("double_free", "error", "decode", "r1", "kv", None, 2, [], 1, "freed twice")
    results = [[f], [f]]
    w = Watcher(path, clock, check=lambda p: results.pop(0), settle_s=0.5)
    rec = Recorder(path, "decode", flush_interval=3600)
    try:
        rec.mark("first")
        rec.flush()
        clock.t = 0.25
        assert w.poll() == []          # seen at the snapshot of 0.25 s, settling
        clock.t = 0.5
        assert w.poll() == [] and w.checks_run == 1
        rec.mark("more")
        rec.flush()
        clock.t = 0.75
        reports = w.poll()             # still found 0.5 s after: reported
        assert [r.finding.check for r in reports] == ["double_free"] and w.checks_run == 2
    finally:
        rec.close()


def test_watch_drops_a_finding_that_the_other_side_resolves(tmp_path):
    """A finding seen on a trace cut mid-flush (one side of the facts landed) and gone at
    the next check is never reported: fake check results, fake clock."""
    from kvtrace.analysis.findings import Finding
    path = str(tmp_path / "t.kvtrace")
    clock = FakeClock()
    results = [[Finding("desc_not_owned", "error", "decode", "r7", "kv", 0, 3, [], 1, "tail artefact")], []]
    w = Watcher(path, clock, check=lambda p: results.pop(0))
    rec = Recorder(path, "prefill", flush_interval=3600)
    try:
        rec.mark("first")
        rec.flush()
        clock.t = 0.2
        assert w.poll() == []          # seen, settling
        rec.mark("decode's side lands")
        rec.flush()
        clock.t = 0.4
        assert w.poll() == []          # gone at the next check
        clock.t = 2.0
        assert w.poll() == [] and w.checks_run == 2
    finally:
        rec.close()


def test_watch_cli_fail_fast_and_bad_input(tmp_path):
    path = tmp_path / "t.kvtrace"
    with Recorder(str(path), "decode") as rec:
        rec.alloc("decode", "r1", "kv", [1])
        rec.free("decode", "r1", "kv", [1])
        rec.free("decode", "r1", "kv", [1])
    from kvtrace.tracer import manifest
    manifest.finish(str(path))
    r = subprocess.run([sys.executable, "-m", "kvtrace", "watch", str(path), "--fail-fast"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "double_free" in r.stdout
    assert "waiting for a recording" not in r.stderr     # the trace is there: no wait announced
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run([sys.executable, "-m", "kvtrace", "watch", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_watch_says_it_waits_for_a_recording_not_started_yet(tmp_path):
    later = tmp_path / "later.kvtrace"
    r = subprocess.run([sys.executable, "-m", "kvtrace", "watch", str(later), "--timeout", "0.5", "--interval", "0.1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"kvtrace watch: waiting for a recording at {later} (Ctrl-C to stop)"
    assert lines[-1].startswith("kvtrace watch: timeout")


@pytest.mark.slow
@pytest.mark.parametrize("inject", ["early-src-free", None], ids=["bug", "clean-twin"])
def test_watch_on_a_live_recording_ends_with_what_check_finds(tmp_path, inject):
    """The reference engine records while a Watcher follows it (real clocks; only the
    result is asserted): every finding watch reported is one `check` finds on the finished
    trace, and every finding `check` finds was reported by the end."""
    from kvtrace.analysis.session import TraceSession

    from live_recording import record_and_follow
    out, reported, _ = record_and_follow(tmp_path, 60, inject, after=30)
    with TraceSession(out) as s:
        final = s.findings()
    assert {identity(f) for f in reported} == {identity(f) for f in final}
    assert len({identity(f) for f in reported}) == len(reported)   # each reported once
    assert bool(final) == bool(inject)
