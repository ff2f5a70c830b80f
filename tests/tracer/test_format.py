"""Trace format v1: Recorder round trip, builder validity, crash safety, bad input."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pytest

from kvtrace.tracer import EventKind, Recorder, TraceError, open_trace
from kvtrace.tracer.builder import TraceBuilder
from kvtrace.tracer.schema import EVENTS, SCHEMA_VERSION

KVTRACE = [sys.executable, "-m", "kvtrace"]


def build_small(path) -> str:
    b = TraceBuilder(str(path))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
        side.pool("index_k", layers=2, slot_bytes=32, num_slots=4, dtype="fp8")
    d.req_start("r1"); p.req_start("r1")
    d.alloc("r1", "kv", [5, 6]); d.msg_send(p, "m1", b"pages 5 6", request="r1"); p.msg_recv(d, "m1", b"pages 5 6", request="r1")
    p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    dl_src = p.prep_dlist(["kv"]); dl_dst = p.prep_dlist(["kv"], remote=d)
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv_0_1_0",
               src_dlist=dl_src, src_idx=[1, 2, 9, 10], dst_dlist=dl_dst, dst_idx=[5, 6, 13, 14])
    d.notif_recv(p, b"r1_kv_0_1_0", request="r1"); p.done(x, "r1"); p.release(x, "r1")
    d.read("r1", "kv", [5, 6])
    p.free("r1", "kv", [1, 2]); d.free("r1", "kv", [5, 6]); d.req_done("r1"); p.req_done("r1")
    return b.close()


def test_builder_trace_validates(tmp_path, validate_trace):
    path = build_small(tmp_path / "small.kvtrace")
    validate_trace(path)
    t = open_trace(path)
    assert [s.name for s in t.shards] == ["decode", "prefill"]
    assert not t.notes
    ds = t.table("descs")
    assert ds.num_rows == 4 and set(ds.column("src_idx").to_pylist()) == {1, 2, 9, 10}
    assert t.table("dlists").num_rows == 2 * 16
    assert t.manifest["complete"] is True and t.manifest["version"] == SCHEMA_VERSION


def test_round_trip_column_by_column(tmp_path, validate_trace):
    """Everything recorded reads back equal, column by column (events, descs, dlists, layouts)."""
    rows = []
    with Recorder(str(tmp_path / "rt.kvtrace"), "main", flush_interval=0.01) as rec:
        rec.layout("decode", "kv", 3, 4096, 128, 10, page_tokens=64, dtype="bf16", part="K")
        for i in range(2000):
            row = dict(kind=list(EventKind)[i % len(EventKind)].value, agent=f"a{i % 3}", request=f"r{i % 7}",
                       pool="kv", layer=i % 5, slots=[i, i + 1], pages=[0, 1], checksums=[2**64 - 1 - i, i],
                       xfer=i, peer="p", addr=2**63 + i, nbytes=i * 10, mem_type="DRAM", device=i % 2,
                       msg=bytes([i % 256]) * 3, status="DONE", detail=json.dumps({"i": i}), t_ns=1000 + i)
            if row["kind"] == EventKind.XFER_POST.value:
                row["nbytes"] = None   # a post's nbytes is its descriptors' sum: these posts record none
            rows.append(row)
            r = dict(row)
            rec.event(r.pop("kind"), r.pop("agent"), r.pop("request"), **r)
            if i % 500 == 0:
                time.sleep(0.02)  # let the background flusher cut several batches
        rec.descs_array(6, "READ", "prefill", "decode", [10, 20], [30, 40], [5, 6], src_dlist=1, src_idx=[0, 1],
                        dst_dlist=2, dst_idx=[3, 4])
        rec.dlist_array(1, "prefill", None, [10, 20, 30], 5)
    validate_trace(str(tmp_path / "rt.kvtrace"))
    t = open_trace(str(tmp_path / "rt.kvtrace"))
    ev = t.table("events")
    assert ev.column("seq").to_pylist() == list(range(2000))
    for name in ("kind", "agent", "request", "pool", "layer", "slots", "pages", "checksums", "xfer", "peer",
                 "addr", "nbytes", "mem_type", "device", "msg", "status", "detail", "t_ns"):
        assert ev.column(name).to_pylist() == [r[name] for r in rows], name
    ds = t.table("descs").to_pylist()
    assert [(d["src_addr"], d["dst_addr"], d["nbytes"], d["src_idx"], d["dst_idx"], d["op"]) for d in ds] == \
        [(10, 30, 5, 0, 3, "READ"), (20, 40, 6, 1, 4, "READ")]
    dl = t.table("dlists").to_pylist()
    assert [(d["idx"], d["addr"], d["remote_agent"]) for d in dl] == [(0, 10, None), (1, 20, None), (2, 30, None)]
    lay = t.table("layouts").to_pylist()[0]
    assert (lay["pool"], lay["layer"], lay["part"], lay["nbytes"], lay["num_slots"]) == ("kv", 3, "K", 1280, 10)
    assert t.shards[0].streams["events"].batches > 1


_CRASHER = r"""
import sys, time
from kvtrace.tracer import Recorder
rec = Recorder(sys.argv[1], "victim", flush_interval=0.05)
i = 0
while True:
    rec.event("mark", "a", detail={"i": i}); i += 1
    if i % 20000 == 0:
        rec.flush()                      # at least this much is on disk now
        print(i, flush=True)
    if i % 1000 == 0:
        time.sleep(0.001)
"""


@pytest.mark.timeout(90)
def test_kill9_keeps_everything_flushed(tmp_path, validate_trace):
    path = str(tmp_path / "crash.kvtrace")
    proc = subprocess.Popen([sys.executable, "-c", _CRASHER, path], stdout=subprocess.PIPE, text=True)
    try:
        flushed = int(proc.stdout.readline())       # first explicit flush done
        flushed = int(proc.stdout.readline())       # and a second, with background flushes between
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    validate_trace(path)
    t = open_trace(path)
    assert any("not closed" in n for n in t.notes)
    seq = t.table("events").column("seq").to_pylist()
    assert len(seq) >= flushed and seq == list(range(len(seq)))  # everything flushed, a clean prefix
    out = subprocess.run(KVTRACE + ["info", path], capture_output=True, text=True)
    assert out.returncode == 0 and "not closed" in " ".join(out.stdout.split())


def test_truncated_stream_keeps_complete_batches(tmp_path):
    path = str(tmp_path / "trunc.kvtrace")
    with Recorder(path, "s", flush_interval=3600) as rec:
        for i in range(300):
            rec.event("mark", "a", detail={"i": i})
            if i % 100 == 99:
                rec.flush()
    ev = os.path.join(path, "s", "events.arrows")
    size = os.path.getsize(ev)
    with open(ev, "r+b") as f:
        f.truncate(size - 300)  # cut into the last batch and the end-of-stream marker
    t = open_trace(path)
    assert t.table("events").num_rows == 200
    assert any("truncated" in n and "kept 2 complete batches" in n for n in t.notes)
    out = subprocess.run(KVTRACE + ["info", path], capture_output=True, text=True)
    assert out.returncode == 0 and "truncated" in out.stdout


def _one_line_error(args) -> str:
    out = subprocess.run(KVTRACE + args, capture_output=True, text=True)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr + out.stdout
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_bad_input_one_clear_line(tmp_path):
    assert "no such trace directory" in _one_line_error(["info", str(tmp_path / "nope")])
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("hello")
    assert "not a trace directory" in _one_line_error(["info", str(foreign)])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no manifest.json" in _one_line_error(["info", str(empty)])
    path = build_small(tmp_path / "v.kvtrace")
    man = json.load(open(os.path.join(path, "manifest.json")))
    man["version"] = 99
    json.dump(man, open(os.path.join(path, "manifest.json"), "w"))
    assert "version 99" in _one_line_error(["info", path])
    path2 = build_small(tmp_path / "g.kvtrace")
    with open(os.path.join(path2, "prefill", "events.arrows"), "wb") as f:
        f.write(b"garbage that is not arrow" * 10)
    assert "not an Arrow IPC stream" in _one_line_error(["info", path2])


def test_missing_shard_is_reported_not_fatal(tmp_path):
    path = build_small(tmp_path / "m.kvtrace")
    import shutil
    shutil.rmtree(os.path.join(path, "decode"))
    t = open_trace(path)
    assert [s.name for s in t.shards] == ["prefill"]
    assert any("decode" in n and "missing" in n for n in t.notes)
    out = subprocess.run(KVTRACE + ["info", path], capture_output=True, text=True)
    assert out.returncode == 0 and "missing" in out.stdout


def test_wrong_stream_version_is_an_error(tmp_path):
    path = build_small(tmp_path / "w.kvtrace")
    ev = os.path.join(path, "decode", "events.arrows")
    schema = EVENTS.with_metadata({b"kvtrace.format": b"kvtrace", b"kvtrace.version": b"2"})
    with pa.OSFile(ev, "wb") as sink, pa.ipc.new_stream(sink, schema):
        pass
    with pytest.raises(TraceError, match="version 2"):
        open_trace(path)


def test_underscore_folders_are_not_shards(tmp_path):
    path = build_small(tmp_path / "u.kvtrace")
    os.makedirs(os.path.join(path, "_index"))
    assert [s.name for s in open_trace(path).shards] == ["decode", "prefill"]


def test_help_is_instant():
    out = subprocess.run(KVTRACE + ["--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "record" in out.stdout
    code = "import sys, kvtrace.cli; kvtrace.cli.build_parser(); print(sorted(m for m in ('pyarrow', 'duckdb', 'textual', 'torch', 'nixl') if m in sys.modules))"
    mods = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    assert mods == "[]", f"heavy modules imported by --help: {mods}"


def test_threads_record_without_loss_or_disorder(tmp_path, validate_trace):
    """The lock-free event path: 4 threads, frequent background flushes — every seq lands
    exactly once and each stream stays strictly increasing."""
    import threading
    path = str(tmp_path / "mt.kvtrace")
    rec = Recorder(path, "mt", flush_interval=0.001, flush_rows=500)
    # all four alive at once: the recorder numbers threads by their identity, which Python
    # reuses once a thread has ended (a thread started after another ended may take its
    # number, which keeps program order true); on a loaded machine a thread could otherwise
    # finish before the last one starts
    started = threading.Barrier(4)

    def work(k):
        started.wait(30)
        for i in range(20000):
            rec.event("mark", f"t{k}", detail={"i": i})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.close()
    validate_trace(path)
    ev = open_trace(path).table("events")
    assert ev.column("seq").to_pylist() == list(range(80000))
    per_thread = {}
    for agent, th in zip(ev.column("agent").to_pylist(), ev.column("thread").to_pylist()):
        per_thread.setdefault(agent, set()).add(th)
    assert all(len(v) == 1 for v in per_thread.values()) and len({min(v) for v in per_thread.values()}) == 4
