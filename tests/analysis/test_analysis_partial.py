"""Traces that carry less: no layouts or allocator hooks (NIXL facts only), a shard cut
short by a crash, a shard that never arrived. Analysis goes as far as the facts allow and
says what could not run and why."""
from __future__ import annotations

import json
import os

import pyarrow as pa

from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main
from kvtrace.tracer.builder import TraceBuilder
from kvtrace.tracer.schema import LAYOUTS

from analysis_cases import CASES, finish, handshake, push


def _nixl_only(path, race: bool):
    """Two transfers into the same decode bytes, no layouts, no alloc/free/write/read."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    sp, dp = p.pools["kv"], d.pools["kv"]
    x1 = p.post("r1", d, descs=[(sp.addr(0, 1), dp.addr(0, 2), 64)], msg=b"a")
    if not race:
        d.notif_recv(p, b"a", request="r1")
        p.done(x1, "r1")
    x2 = p.post("r2", d, descs=[(sp.addr(0, 3), dp.addr(0, 2), 64)], msg=b"b")
    if race:
        d.notif_recv(p, b"a", request="r1")
        p.done(x1, "r1")
    d.notif_recv(p, b"b", request="r2")
    p.done(x2, "r2")
    for x in (x1, x2):
        p.release(x)
    b.close()
    for shard in ("prefill", "decode"):   # drop what only engine hooks know
        with pa.OSFile(os.path.join(path, shard, "layouts.arrows"), "wb") as f, pa.ipc.new_stream(f, LAYOUTS):
            pass


def test_without_layouts_runs_byte_checks_and_says_what_was_skipped(tmp_path, capsys):
    for race in (True, False):
        path = str(tmp_path / f"nixl-{race}.kvtrace")
        _nixl_only(path, race)
        with TraceSession(path) as s:
            found = s.findings()
            skipped = dict(s.checks_skipped)
        assert [f.check for f in found] == (["overlapping_inflight_writes"] if race else [])
        assert "layouts" in skipped["layer_offset_mismatch"]
        assert "alloc/free" in skipped["double_free"]
        assert "desc_out_of_bounds" not in skipped and "inflight_src_overwritten" not in skipped
    rc = main(["check", str(tmp_path / "nixl-True.kvtrace")])
    out = capsys.readouterr().out
    assert rc == 1 and "skipped layer_offset_mismatch" in out and "ruled out" not in out


def test_missing_shard_is_reported_and_the_rest_analysed(tmp_path, capsys):
    path = str(tmp_path / "m.kvtrace")
    CASES["early_src_free"](path, bug=True)
    import shutil
    shutil.rmtree(os.path.join(path, "decode"))
    with TraceSession(path) as s:
        found = s.findings()
        assert any("decode" in n and "missing" in n for n in s.notes)
        assert ("leak", "a shard is missing or was not closed, so the trace may end mid-run") in s.checks_skipped
        cut = s.cuts["prefill"].cut
    # prefill learnt its destination pages from decode: what decode sent is lost, so
    # prefill's facts from that receive on are unknown (decode may have told it that the
    # transfer completed before the free), never evidence of a violation
    assert cut is not None and found == [], [f.message for f in found]
    rc = main(["check", path])
    out = capsys.readouterr().out
    assert rc == 0 and "missing" in out and "decode" in out and "proves nothing" in out and "ruled out" not in out


def test_truncated_shard_keeps_complete_batches(tmp_path, capsys):
    path = str(tmp_path / "t.kvtrace")
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.rec.flush()                       # a complete batch on disk
    finish(p, d, "r1", x, [4, 5], [2, 3])
    b.close()
    ev = os.path.join(path, "decode", "events.arrows")
    size = os.path.getsize(ev)
    with open(ev, "r+b") as f:          # a crash mid-write of the last batch
        f.truncate(size - 40)
    info = os.path.join(path, "decode", "shard.json")
    with open(info) as f:
        meta = json.load(f)
    meta["closed"] = False
    with open(info, "w") as f:
        json.dump(meta, f)
    with TraceSession(path) as s:
        found = s.findings()
        n_decode = s.query("select count(*) n from events where shard = 'decode'").column("n")[0].as_py()
        assert any("truncated" in n for n in s.notes) and any("not closed" in n for n in s.notes)
        assert n_decode > 0
        assert "leak" in dict(s.checks_skipped)
    assert found == [], [f.message for f in found]
    rc = main(["check", path])
    out = capsys.readouterr().out
    assert rc == 0 and "truncated" in out
