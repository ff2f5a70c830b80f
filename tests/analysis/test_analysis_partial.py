"""Traces that carry less: no layouts or allocator hooks (NIXL facts only), a shard cut
short by a crash, a shard that never arrived. Analysis goes as far as the facts allow and
says what could not run and why."""
from __future__ import annotations

import os
import shutil

import pyarrow as pa

from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main
from kvtrace.tracer.builder import TraceBuilder
from kvtrace.tracer.schema import LAYOUTS

from analysis_cases import CASES, finish, handshake, push
from partial_cases import _unclose as unclose


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
    unclose(path, "decode")
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


def _read_races_post(path: str, lose_post: bool) -> str:
    """Decode reads r1's pages while prefill's WRITE into them is in flight (the read is not
    ordered after the post); r0 before it is delivered in full. ``lose_post``: prefill crashed right before recording its post,
    so the post and all after it never reached the trace (its shard is not closed)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    d.alloc("r0", "kv", [3])                         # an earlier request, delivered in full
    d.msg_send(p, "m0", request="r0")
    p.msg_recv(d, "m0", request="r0")
    p.alloc("r0", "kv", [0])
    p.write("r0", "kv", [0])
    x0 = p.post("r0", d, src=("kv", [0]), dst=("kv", [3]), msg=b"r0_kv")
    d.notif_recv(p, b"r0_kv", request="r0")
    p.done(x0, "r0")
    d.read("r0", "kv", [3])
    d.alloc("r1", "kv", [5, 6])
    d.msg_send(p, "m1", request="r1")
    p.msg_recv(d, "m1", request="r1")
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    d.read("r1", "kv", [5, 6])                      # races the transfer below
    if not lose_post:
        x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
        p.done(x, "r1")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.free("r1", "kv", [5, 6])
    b.close()
    if lose_post:
        unclose(path, "prefill")
    return path


def test_a_read_racing_a_post_lost_in_a_cut_tail_is_not_called_undelivered(tmp_path):
    """Whole, the trace shows the read racing the transfer (read_before_done). With the
    post lost in prefill's unrecorded tail, nothing proves that no transfer delivered the
    pages: read_undelivered would explain a real race wrongly, so it stays silent and the
    cut is named as unknown."""
    with TraceSession(_read_races_post(str(tmp_path / "whole.kvtrace"), lose_post=False)) as s:
        whole = {f.check for f in s.findings()}
    assert "read_before_done" in whole and "read_undelivered" not in whole, whole
    with TraceSession(_read_races_post(str(tmp_path / "cut.kvtrace"), lose_post=True)) as s:
        found = {f.check for f in s.findings()}
        assert s.unknowns
    assert "read_undelivered" not in found, found


def test_a_read_racing_a_post_of_a_missing_shard_is_not_called_undelivered(tmp_path):
    """Two prefill processes feed one decode; the second one's shard never arrived (listed in
    the manifest). Decode read that prefill's pages while its transfer was in flight: no
    recorded fact says whether a transfer delivered them, so read_undelivered stays silent.
    The whole twin shows the race as read_before_done."""
    def build(path):
        b = TraceBuilder(path)
        p1, p2, d = b.agent("prefill1"), b.agent("prefill2"), b.agent("decode")
        for side in (p1, p2, d):
            side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
        for p, r, s, ds in ((p1, "r0", 0, 3), (p2, "r1", 1, 5)):
            d.alloc(r, "kv", [ds])
            d.msg_send(p, "m" + r, request=r)
            p.msg_recv(d, "m" + r, request=r)
            p.alloc(r, "kv", [s])
            p.write(r, "kv", [s])
        x0 = p1.post("r0", d, src=("kv", [0]), dst=("kv", [3]), msg=b"r0_kv")
        d.notif_recv(p1, b"r0_kv", request="r0")
        p1.done(x0, "r0")
        d.read("r0", "kv", [3])
        d.read("r1", "kv", [5])                          # races prefill2's transfer
        x1 = p2.post("r1", d, src=("kv", [1]), dst=("kv", [5]), msg=b"r1_kv")
        p2.done(x1, "r1")                                 # (decode's notification not recorded yet)
        return b.close()

    with TraceSession(build(str(tmp_path / "whole.kvtrace"))) as s:
        whole = {(f.check, f.request) for f in s.findings()}
    assert ("read_before_done", "r1") in whole and not {c for c, _ in whole} & {"read_undelivered"}, whole
    path = build(str(tmp_path / "missing.kvtrace"))
    shutil.rmtree(os.path.join(path, "prefill2"))
    with TraceSession(path) as s:
        found = {f.check for f in s.findings()}
        assert any("prefill2" in u.what for u in s.unknowns), s.unknowns
    assert "read_undelivered" not in found, found
