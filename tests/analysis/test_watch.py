"""kvtrace watch (issue 20): new findings reported at the first poll after their facts are
flushed, checks re-run only when the trace grew. The clock is injected: no sleeps, no
timed assertions."""
from __future__ import annotations

import subprocess
import sys

from kvtrace.analysis.watch import Watcher
from kvtrace.tracer.recorder import Recorder


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_watch_reports_a_hazard_at_the_poll_after_its_flush(tmp_path):
    path = str(tmp_path / "live.kvtrace")
    clock = FakeClock()
    w = Watcher(path, clock)
    assert w.poll() == []                          # nothing written yet
    rec = Recorder(path, "decode", flush_interval=3600)
    try:
        rec.alloc("decode", "r1", "kv", [1, 2])
        rec.flush()
        clock.t = 0.2
        assert w.poll() == [] and w.checks_run == 1
        clock.t = 0.4
        assert w.poll() == [] and w.checks_run == 1   # nothing grew: the checks do not re-run
        rec.free("decode", "r1", "kv", [1, 2])
        rec.flush()
        clock.t = 0.6
        assert w.poll() == [] and w.checks_run == 2   # clean twin: alloc then free, no finding
        rec.free("decode", "r1", "kv", [2])             # a double free lands at t=0.7
        rec.flush()
        landed = clock.t = 0.7
        clock.t = 0.8
        assert w.poll() == [] and w.checks_run == 3   # found, settling (0.5 s)
        clock.t = 1.0
        assert w.poll() == [] and w.checks_run == 3
        clock.t = 1.4
        reports = w.poll()                              # nothing changed since: settled
        assert [r.finding.check for r in reports] == ["double_free"]
        assert reports[0].seen_at - landed <= 1.0
        rec.free("decode", "r1", "kv", [2])             # the same root cause again: not reported twice
        rec.flush()
        clock.t = 2.0
        assert w.poll() == [] and w.checks_run == 4
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
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run([sys.executable, "-m", "kvtrace", "watch", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
