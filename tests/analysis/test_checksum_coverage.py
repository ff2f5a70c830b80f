"""checksum_mismatch never reads "holds" over reads it could not compare.

A read's checksum is predicted from the checksum of the write the transfer copied — only
when the copy is a whole slot. A head slice (decode holds fewer KV heads per token than
prefill: heterogeneous TP) fills a decode slot with part of a prefill slot, whose bytes no
recorded checksum covers. Then the check compares nothing: it is listed as skipped, with
why. Where only some reads are head slices it compares the rest: its state is "unknown"
(not "holds") and a note says how many it left out. The clean twin (whole-slot copies
only) stays as it was: compared, "holds", no note.
"""
from __future__ import annotations

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.analysis.verdict import verdict

from cases_helpers import finish, handshake

POOLS = {"kv": (64, 64), "kvh": (64, 32)}    # pool -> (prefill slot bytes, decode slot bytes)
#: decode records no write of its own in these scenarios: that check examines nothing (skipped)
NO_DECODE_WRITES = ["owner_overwrites_delivered"]


def _trace(path, sliced_pools: tuple[str, ...]) -> str:
    """Prefill TP 1 -> decode TP 2's rank 0: pool kv copied whole; pool kvh (when used)
    holds one of prefill's two KV heads per token on decode: its descriptors copy the first
    half of each prefill slot into a whole decode slot."""
    from kvtrace.tracer.builder import TraceBuilder
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for name, (pb, db) in POOLS.items():
        p.pool(name, layers=2, slot_bytes=pb, num_slots=8)
        d.pool(name, layers=2, slot_bytes=db, num_slots=8)
    pools = ("kv",) + sliced_pools
    for i, req in enumerate(["r1", "r2"]):
        src, dst = [i], [4 + i]
        d.req_start(req)
        for pool in pools:
            d.alloc(req, pool, dst)
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
        xs = []
        for pool in pools:
            p.alloc(req, pool, src)
            p.write(req, pool, src)
            sp, dp = p.pools[pool], d.pools[pool]
            descs = [(sp.addr(layer, src[0]), dp.addr(layer, dst[0]), dp.slot_bytes_of(layer)) for layer in range(2)]
            xs.append(p.post(req, d, descs=descs, msg=f"{req}_{pool}".encode()))
        for pool in pools:
            d.notif_recv(p, f"{req}_{pool}".encode(), request=req)
        for pool in pools:
            d.read(req, pool, dst)
        for x in xs:
            p.done(x, req)
            p.release(x, req)
        for pool in pools:
            p.free(req, pool, src, reason="finish")
            d.free(req, pool, dst, reason="finish")
        d.req_done(req)
    b.close()
    return path


@pytest.mark.parametrize("sliced", [(), ("kvh",)], ids=["whole-copies", "head-slices-beside-whole"])
def test_checksum_mismatch_says_what_it_compared(tmp_path, sliced):
    path = _trace(str(tmp_path / "t.kvtrace"), sliced)
    with TraceSession(path) as s:
        found = s.findings()
        assert found == [], [f.message for f in found]
        v = verdict(s, found, ["none"])
        assert [c for c, _ in s.checks_skipped] == NO_DECODE_WRITES
        if not sliced:                     # the clean twin: every read compared
            assert s.checks_partial == {} and v.checks["checksum_mismatch"] == "holds"
            assert not [n for n in s.notes if "compared" in n]
        else:                              # 2 requests x 2 layers: 4 reads of kv compared, 4 of kvh not
            assert v.checks["checksum_mismatch"] == "unknown"
            assert list(s.checks_partial) == ["checksum_mismatch"]
            assert "compared 4 of 8 read slot layers with a checksum" in s.checks_partial["checksum_mismatch"]
            assert any("head slice" in n for n in s.notes)
        others = {c: st for c, st in v.checks.items() if c not in ["checksum_mismatch"] + NO_DECODE_WRITES}
        assert set(others.values()) == {"holds"}, others


def test_only_head_slices_skip_checksum_mismatch_with_why(tmp_path):
    """Every read filled by a head slice: nothing compared, so skipped (never "holds")."""
    from kvtrace.tracer.builder import TraceBuilder
    path = str(tmp_path / "heads.kvtrace")
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    d.pool("kv", layers=2, slot_bytes=32, num_slots=8)
    handshake(p, d, "r1", [5])
    p.alloc("r1", "kv", [1])
    p.write("r1", "kv", [1])
    x = p.post("r1", d, descs=[(p.pools["kv"].addr(layer, 1), d.pools["kv"].addr(layer, 5), 32) for layer in range(2)],
               msg=b"r1_kv")
    finish(p, d, "r1", x, [1], [5])
    b.close()
    with TraceSession(path) as s:
        found = s.findings()
        assert found == [], [f.message for f in found]
        why = dict(s.checks_skipped)["checksum_mismatch"]
        assert why.startswith("none of its 2 read slot layers with a checksum could be compared") and "head slice" in why
        v = verdict(s, found, ["none"])
        assert v.checks["checksum_mismatch"] == "skipped" and "checksum_mismatch" not in v.checks_run
        assert s.checks_partial == {}


def test_check_json_junit_and_tui_say_compared_in_part(tmp_path):
    """What the check left out reaches every output: JSON's compared_in_part and notes,
    the JUnit case's system-out, the TUI's counts line."""
    import json
    import subprocess
    import sys

    from kvtrace.tui.findings_panel import counts_line
    path = _trace(str(tmp_path / "t.kvtrace"), ("kvh",))
    js = subprocess.run([sys.executable, "-m", "kvtrace", "check", path, "--format", "json"],
                        capture_output=True, text=True, timeout=300)
    assert js.returncode == 0, js.stderr
    out = json.loads(js.stdout)
    assert [p["check"] for p in out["compared_in_part"]] == ["checksum_mismatch"]
    assert out["verdict"]["checks"]["checksum_mismatch"] == "unknown"
    assert [x["check"] for x in out["skipped"]] == NO_DECODE_WRITES
    assert any("compared 4 of 8" in n for n in out["notes"])
    ju = subprocess.run([sys.executable, "-m", "kvtrace", "check", path, "--format", "junit"],
                        capture_output=True, text=True, timeout=300)
    assert ju.returncode == 0 and "compared in part only: checksum_mismatch compared 4 of 8" in ju.stdout
    assert "compared in part only: checksum_mismatch" in counts_line([], [], ["checksum_mismatch"]).plain


@pytest.mark.parametrize("split_alloc", [False, True], ids=["one-alloc", "pages-allocated-apart"])
@pytest.mark.parametrize("bug", [False, True])
def test_coalesced_run_is_compared_page_by_page(tmp_path, bug, split_alloc):
    """SGLang's generic path sends contiguous pages as one descriptor per layer (a coalesced
    run: slots 1-3 -> 5-7, 192 bytes). Every page of the run is predicted from its own source
    page, with its own holding (decode may have allocated the pages apart: one, then two
    more), so a run whose third page arrives with other bytes is found on that page; the
    clean twin checks clean with every read compared."""
    from kvtrace.tracer.builder import TraceBuilder
    path = str(tmp_path / f"run-{int(bug)}-{int(split_alloc)}.kvtrace")
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for a in (p, d):
        a.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    if split_alloc:
        d.req_start("r1")
        d.alloc("r1", "kv", [5])
        d.alloc("r1", "kv", [6, 7], pages=[1, 2])
        d.msg_send(p, "r1/pages", request="r1")
        p.msg_recv(d, "r1/pages", request="r1")
    else:
        handshake(p, d, "r1", [5, 6, 7])
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[(sp.addr(L, 1), dp.addr(L, 5), 3 * 64) for L in range(2)], msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6])
    d.read("r1", "kv", [7], checksums=[0xBAD] if bug else None)   # the run's last page, both layers
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3], reason="finish")
    d.free("r1", "kv", [5, 6, 7], reason="finish")
    d.req_done("r1")
    b.close()
    with TraceSession(path) as s:
        found = s.findings()
        assert s.checks_partial == {} and [c for c, _ in s.checks_skipped] == NO_DECODE_WRITES
        if not bug:
            assert found == [], [f.message for f in found]
        else:
            assert [(f.check, f.request, f.slots, f.count) for f in found] == [("checksum_mismatch", "r1", [7], 2)]
            assert "delivered by its transfer" in found[0].message
