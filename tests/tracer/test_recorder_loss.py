"""No lost data, ever silently: real write failures (a file size limit, RLIMIT_FSIZE, makes
the kernel refuse writes past it) while a recorder runs. Every recorded event is then
either in the trace or counted as lost in shard.json, and `info` and `check` say so."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kvtrace.tracer import Recorder, open_trace

KVTRACE = [sys.executable, "-m", "kvtrace"]

# The child records `total` events in rounds; after the first round the events file may
# grow only `room` more bytes. mode: "persist" (the limit stays: later rows are lost),
# "transient" (the limit is lifted before close: every row lands), "backlog" (a small
# backlog limit drops rows mid-run, then the limit is lifted: a seq gap in the middle).
CHILD = textwrap.dedent("""
    import os, resource, signal, sys
    from kvtrace.tracer.recorder import Recorder
    path, mode, room = sys.argv[1], sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    rec = Recorder(path, "s", flush_interval=3600, flush_rows=10**9,
                   max_backlog_rows=300 if mode == "backlog" else 1 << 22)
    total = 0
    def round_(n):
        global total
        for i in range(n):
            rec.event("mark", "a", f"r{total % 5}", detail={"i": total, "pad": "x" * 40})
            if total % 10 == 0:  # descs: a dictionary-encoded stream (agent names)
                rec.descs_array(total, "WRITE", f"p{total % 3}", "d", [total, total + 64], [0, 64], 64)
            total += 1
        rec.flush()
    round_(200)
    size = os.path.getsize(os.path.join(path, "s", "events.arrows"))
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + room, hard))
    for _ in range(4):
        round_(200)
    if mode in ("transient", "backlog"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        round_(100)
    rec.close()
    print(total)
""")


def _record(tmp_path, mode: str, room: int = 30000) -> tuple[str, int, str]:
    path = str(tmp_path / f"{mode}.kvtrace")
    r = subprocess.run([sys.executable, "-c", CHILD, path, mode, str(room)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return path, int(r.stdout.strip()), r.stderr


def _seqs(path: str) -> list[int]:
    return open_trace(path).table("events").column("seq").to_pylist()


def _lost_seqs(path: str) -> list[int]:
    with open(os.path.join(path, "s", "shard.json")) as f:
        info = json.load(f)
    return [q for a, b in info.get("lost", {}).get("event_seqs", []) for q in range(a, b + 1)]


@pytest.mark.parametrize("mode", ["persist", "backlog"])
def test_every_event_is_in_the_trace_or_counted_lost(tmp_path, mode):
    path, total, stderr = _record(tmp_path, mode)
    kept, lost = _seqs(path), _lost_seqs(path)
    assert lost, "the limit must have made some writes fail"
    assert kept, "the rows written before the limit must be there"
    assert sorted(kept + lost) == list(range(total))          # each event exactly once
    assert "writing the trace failed" in stderr and stderr.count("\n") <= 3  # said once, not per flush
    with open(os.path.join(path, "s", "shard.json")) as f:
        info = json.load(f)
    assert info["closed"] and info["lost"]["rows"]["events"] == len(lost)
    trace = open_trace(path)
    assert not trace.truncated                                  # failed writes were cut back off the file
    descs = trace.table("descs")
    assert descs.num_rows + info["lost"]["rows"].get("descs", 0) == 2 * total // 10
    assert set(descs.column("src_agent").to_pylist()) <= {"p0", "p1", "p2"}
    notes = " ".join(trace.notes)
    assert f"lost {len(lost):,} rows" in notes
    if mode == "backlog":                                       # rows after the gap were written
        assert max(kept) > min(lost) and "events missing from the trace" in notes
    for cmd in (["info"], ["check"]):
        r = subprocess.run(KVTRACE + cmd + [path], capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1), r.stderr
        assert "Traceback" not in r.stderr
        assert f"lost {len(lost):,} rows" in " ".join(r.stdout.split()), r.stdout


def test_a_transient_failure_loses_nothing(tmp_path):
    """The clean twin: the rows of the failed flushes are kept and written once writes work."""
    path, total, stderr = _record(tmp_path, "transient")
    assert "kept for the next flush" in stderr                 # the failure did happen
    assert _seqs(path) == list(range(total)) and _lost_seqs(path) == []
    trace = open_trace(path)
    descs = trace.table("descs")                               # dictionaries sent anew after the failure
    assert descs.num_rows == 2 * total // 10
    assert descs.column("src_agent").to_pylist()[::2] == [f"p{x % 3}" for x in range(0, total, 10)]
    assert not any("lost" in n or "missing" in n for n in trace.notes), trace.notes


def test_invalid_values_are_counted_not_hidden(tmp_path):
    path = str(tmp_path / "bad.kvtrace")
    with Recorder(path, "s", flush_interval=3600) as rec:
        rec.event("write", "a", "r1", pool="kv", layer=0, slots=[1], checksums=[1])
        rec.event("write", "a", "r1", pool="kv", layer=0, slots=["not a slot"], checksums=[1])
        rec.event("mark", "a")
    assert _seqs(path) == [0, 2] and _lost_seqs(path) == [1]
    notes = " ".join(open_trace(path).notes)
    assert "lost 1 rows" in notes and "invalid values" in notes and "1 events missing" in notes


def test_untraced_postings_are_counted_by_reason(tmp_path):
    path = str(tmp_path / "u.kvtrace")
    rec = Recorder(path, "s", flush_interval=3600)
    rec.untraced("descriptor list prepared before tracing started")
    rec.untraced("descriptor list prepared before tracing started")
    rec.close()
    rec.untraced("posted after the recording ended")       # after close: written at once
    notes = " ".join(open_trace(path).notes)
    assert "3 transfer postings went to NIXL untraced" in notes
    assert "descriptor list prepared before tracing started: 2" in notes
    assert "posted after the recording ended: 1" in notes
