"""TracedAgent with two real NIXL agents (UCX, DRAM) in one process."""
from __future__ import annotations

import gc
import json
import re
import time

import numpy as np
import pytest

nixl_api = pytest.importorskip("nixl._api")

from kvtrace.tracer import Recorder, open_trace  # noqa: E402
from kvtrace.tracer.agent import TracedAgent, original_agent_class  # noqa: E402
from kvtrace.tracer.agent_tap import BindingTap  # noqa: E402
from kvtrace.tracer.recorder import NATIVE_ROWS  # noqa: E402
from kvtrace.tracer.tags import make_parser  # noqa: E402

PAGE = 256


def _cfg(**kw):
    return nixl_api.nixl_agent_config(backends=["UCX"], **kw)


def _wait(agent, h):
    while (s := agent.check_xfer_state(h)) == "PROC":
        pass
    return s


def _notifs(agent, n, timeout=10.0, how="get"):
    got, deadline = {}, time.time() + timeout
    while sum(len(v) for v in got.values()) < n and time.time() < deadline:
        new = agent.get_new_notifs() if how == "get" else agent.update_notifs()
        for k, v in new.items():
            got.setdefault(k, []).extend(v) if how == "get" else got.__setitem__(k, list(v))
    return got


def scenario(make):
    """WRITE (prepped, posted twice), READ (plain lists), standalone notification.

    Returns every result a program could observe, with handle pointers left out.
    """
    a, b = make("A", _cfg(capture_telemetry=True)), make("B", _cfg(capture_telemetry=True))
    src = (np.arange(8 * PAGE) % 251).astype(np.uint8)
    dst = np.zeros(8 * PAGE, np.uint8)
    out = []
    ra = a.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    rb = b.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    rel = [(ra[0][0] - src.ctypes.data,) + tuple(ra[0][1:]), (rb[0][0] - dst.ctypes.data,) + tuple(rb[0][1:])]
    out.append((ra.descCount(), rb.descCount(), rel))
    out.append(a.add_remote_agent(b.get_agent_metadata()))
    out.append(b.add_remote_agent(a.get_agent_metadata()))
    loc = a.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    rem = a.prep_xfer_dlist("B", [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    out.append((type(loc).__name__, type(rem).__name__))
    h = a.make_prepped_xfer("WRITE", loc, [0, 1, 2], rem, [5, 6, 7], b"42_kv_0_1_0")
    out.append(type(h).__name__)
    out.append(a.transfer(h) in ("PROC", "DONE"))
    out += [_wait(a, h), a.check_xfer_state(h), a.check_xfer_state(h)]
    out.append(a.get_xfer_telemetry(h).totalBytes)
    a.transfer(h)  # the same handle posted again
    out.append(_wait(a, h))
    a.release_xfer_handle(h)
    out.append(_notifs(b, 2))
    ld = b.get_xfer_descs(np.array([[dst.ctypes.data, 2 * PAGE, 0]], dtype=np.uint64), "DRAM")
    rd = b.get_xfer_descs([(src.ctypes.data + 3 * PAGE, 2 * PAGE, 0)], "DRAM")
    r = b.initialize_xfer("READ", ld, rd, "A", b"req-7:1")
    b.transfer(r)
    out.append(_wait(b, r))
    r.release()  # through the handle, not the agent
    out.append(_notifs(a, 1, how="update"))
    b.send_notif("A", b"42_aux")
    deadline = time.time() + 10
    while not a.check_remote_xfer_done("B", b"42_") and time.time() < deadline:
        pass
    out.append(a.notifs)
    out.append(bytes(dst))
    a.deregister_memory(ra)
    b.deregister_memory(rb)
    return out, (a, b, src, dst)


def _events(trace, kind=None):
    ev = trace.table("events").to_pylist()
    return [e for e in ev if kind is None or e["kind"] == kind]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tmp_path_factory.mktemp("agent") / "t.kvtrace"
    rec = Recorder(str(path), "main")
    out, (a, b, src, dst) = scenario(lambda n, c: TracedAgent(n, c, recorder=rec, request_tags="auto"))
    rec.close()
    return out, open_trace(str(path)), path, src.ctypes.data, dst.ctypes.data


def test_wrapped_results_equal_unwrapped(traced):
    plain, _ = scenario(lambda n, c: original_agent_class()(n, c))
    assert traced[0] == plain
    assert issubclass(TracedAgent, original_agent_class())


def _tap_tables(path, native: bool, made: bool = True):
    """scenario() recorded with the tap's per-posting calls in C (native) or in Python: every
    table's rows, times dropped (and telemetry's), addresses as (buffer, offset), handles in
    details as "h". ``made`` False: the tap is not told which arrays get_xfer_descs made its
    lists of (every transfer list read back)."""
    rec = Recorder(str(path), "main")
    taps = []

    def make(name, cfg):
        a = TracedAgent(name, cfg, recorder=rec, request_tags="auto")
        a.agent = BindingTap(a.agent._inner, a.name, rec, make_parser("auto"), a.agent._telemetry, native=native)
        if not made:
            a.agent.made_list = lambda *args: None
        taps.append(a.agent)
        return a
    out, (a, b, src, dst) = scenario(make)
    prepped_in_python = []
    out2, (c, d, src2, dst2) = _prepped_arrays(make, prepped_in_python)
    resolved_in_python = []
    out3, (e, f, src3, dst3) = _initialize_arrays(make, resolved_in_python)
    rec.close()
    in_c = {type(t.postXferReq).__name__ == "builtin_function_or_method" for t in taps}
    assert in_c == {native and hasattr(NATIVE_ROWS, "tap")}   # (an extension built before the C tap: Python)
    # index arrays of int32/int64 over one-size lists: resolved in C when the tap is
    assert len(prepped_in_python) == (0 if in_c == {True} else 5)
    # lists made of Nx3 arrays: resolved in C when the tap is, but for the list posted twice
    assert len(resolved_in_python) == (1 if in_c == {True} and made else 5)
    bases = {src.ctypes.data: "src", dst.ctypes.data: "dst", src2.ctypes.data: "src2", dst2.ctypes.data: "dst2",
             src3.ctypes.data: "src3", dst3.ctypes.data: "dst3"}

    def addr(v):
        if v is None:
            return None
        base = max((b for b in bases if b <= v), default=None)
        return (bases[base], v - base) if base is not None and v - base < 8 * PAGE else v

    def detail(v):
        if v is None:
            return None
        v = re.sub(r'"(start|post|xfer)_us": ?\d+', r'"\1_us": 0', v)   # NIXL's telemetry times
        # a handle's address, not ranked: a released handle's address can come back for a later
        # handle in one run and not in the other (the heap's state), so ranks are not comparable
        return re.sub(r"0x[0-9a-f]+", "h", v)
    t = open_trace(str(path))
    tables = {}
    for name in ("events", "descs", "dlists", "layouts"):
        rows = t.table(name).to_pylist()
        for r in rows:
            r.pop("t_ns", None)
            for c in ("addr", "src_addr", "dst_addr"):
                if c in r:
                    r[c] = addr(r[c])
            if "detail" in r:
                r["detail"] = detail(r["detail"])
        tables[name] = rows
    return out + out2 + out3, tables


def _link(a, src, b, dst) -> None:
    """Register ``src`` with agent ``a`` and ``dst`` with ``b`` (DRAM), and make each known to the other."""
    a.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    b.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    b.add_remote_agent(a.get_agent_metadata())


def _prepped_arrays(make, prepped_in_python: list):
    """Prepped postings with numpy index arrays (what engines pass): WRITE with int32 indices,
    READ with int64 ones, a WRITE whose message is a str, both ops over lists whose entries
    have two sizes; each tap's Python resolution of a handle counted in ``prepped_in_python``."""
    c, d = make("C", _cfg()), make("D", _cfg())
    for agent in (c, d):
        py = agent.agent._prepped
        agent.agent._prepped = lambda *a, _py=py: (prepped_in_python.append(a[0]), _py(*a))[1]
    src = (np.arange(8 * PAGE) % 241).astype(np.uint8)
    dst = np.zeros(8 * PAGE, np.uint8)
    _link(c, src, d, dst)
    loc = c.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    rem = c.prep_xfer_dlist("D", [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    # entries of two sizes (a group of pools with different item sizes)
    mixed = [(i * PAGE, PAGE // 2 if i % 2 else PAGE, 0) for i in range(4)]
    loc2 = c.prep_xfer_dlist("", np.array([(src.ctypes.data + 4 * PAGE + a, n, v) for a, n, v in mixed]), "DRAM")
    rem2 = c.prep_xfer_dlist("D", np.array([(dst.ctypes.data + 4 * PAGE + a, n, v) for a, n, v in mixed]), "DRAM")
    out = []
    for op, lists, li, ri, msg in (
            ("WRITE", (loc, rem), np.array([0, 1, 2], np.int32), np.array([5, 6, 7], np.int32), b"9_kv_0_1_0"),
            ("READ", (loc, rem), np.array([4, 7], np.int64), np.array([0, 1], np.int64), b"10_kv_0_1_0"),
            ("WRITE", (loc, rem), np.array([3], np.int32), np.array([3], np.int32), "11_kv_0_1_0"),
            ("WRITE", (loc2, rem2), np.array([1, 2, 3], np.int32), np.array([1, 2, 3], np.int32), b"12_kv_0_1_0"),
            ("READ", (loc2, rem2), np.array([0, 1], np.int64), np.array([0, 1], np.int64), b"13_kv_0_1_0")):
        _post_wait_release(c, c.make_prepped_xfer(op, lists[0], li, lists[1], ri, msg), out)
    out += [_notifs(d, 5), bytes(dst)]
    return out, (c, d, src, dst)


def _post_wait_release(agent, h, out: list) -> None:
    """Post handle ``h``, wait for its end (kept in ``out``), release it."""
    agent.transfer(h)
    out.append(_wait(agent, h))
    agent.release_xfer_handle(h)


def _initialize_arrays(make, resolved_in_python: list):
    """initialize_xfer postings of transfer lists get_xfer_descs made of Nx3 arrays (how SGLang's
    and vLLM's connectors pass a posting's descriptors): WRITE over uint64 rows, READ over int64
    ones, entries of two sizes; an array the engine refills right after get_xfer_descs; a list
    given to two postings."""
    e, f = make("E", _cfg()), make("F", _cfg())
    py = e.agent._created   # the tap's Python resolution of a handle (read back): counted
    e.agent._created = lambda *a, _py=py: (resolved_in_python.append(a[0]), _py(*a))[1]
    src = (np.arange(8 * PAGE) % 239).astype(np.uint8)
    dst = np.zeros(8 * PAGE, np.uint8)
    _link(e, src, f, dst)

    def rows(buf, pages, dtype, half=()):
        return np.array([(buf.ctypes.data + p * PAGE, PAGE // 2 if p in half else PAGE, 0) for p in pages], dtype)
    out = []
    shared = e.get_xfer_descs(rows(src, [6], np.uint64), "DRAM")
    refilled = rows(src, [0, 1], np.int64)
    first = e.get_xfer_descs(refilled, "DRAM")
    refilled[:] = rows(src, [4, 5], np.int64)   # the engine reuses its array for its next list
    for op, local, remote, msg in (
            ("WRITE", e.get_xfer_descs(rows(src, [0, 1, 2], np.uint64, half=(1,)), "DRAM"),
             e.get_xfer_descs(rows(dst, [5, 6, 7], np.uint64, half=(6,)), "DRAM"), b"20_kv_0_1_0"),
            ("READ", e.get_xfer_descs(rows(src, [3, 4], np.int64), "DRAM"),
             e.get_xfer_descs(rows(dst, [5, 6], np.int64), "DRAM"), b"21_kv_0_1_0"),
            ("WRITE", first, e.get_xfer_descs(rows(dst, [0, 1], np.int64), "DRAM"), b"22_kv_0_1_0"),
            ("WRITE", shared, e.get_xfer_descs(rows(dst, [2], np.uint64), "DRAM"), b"23_kv_0_1_0"),
            ("WRITE", shared, e.get_xfer_descs(rows(dst, [3], np.uint64), "DRAM"), b"24_kv_0_1_0")):
        _post_wait_release(e, e.initialize_xfer(op, local, remote, "F", msg), out)
    out += [_notifs(f, 5), bytes(dst)]
    return out, (e, f, src, dst)


def test_transfer_lists_from_arrays_record_what_nixl_holds(tmp_path):
    """initialize_xfer's descriptors taken from the arrays get_xfer_descs made its lists of are
    the rows read back from the lists themselves (an array refilled after its list was made, a
    list given to two postings), with the tap's calls in C and in Python."""
    for native in (True, False):
        out_made, rows_made = _tap_tables(tmp_path / f"made-{native}.kvtrace", native)
        out_read, rows_read = _tap_tables(tmp_path / f"read-{native}.kvtrace", native, made=False)
        assert out_made == out_read
        for name in rows_read:
            assert rows_made[name] == rows_read[name], (native, name)
        posted = [d for d in rows_made["descs"] if d["src_addr"] and d["src_addr"][0] == "src3"]
        assert [(d["src_addr"][1], d["nbytes"]) for d in posted][:3] == [(0, PAGE), (PAGE, PAGE // 2), (2 * PAGE, PAGE)]
        assert [d["src_addr"][1] for d in posted if d["dst_addr"][0] == "dst3"][3:5] == [0, PAGE]   # not 4, 5


def test_tap_rows_in_c_equal_python(tmp_path):
    """The tap's per-posting calls in C (tracer/_rows.c) record exactly the rows its Python
    methods do, on the same calls (WRITE posted twice with telemetry, READ over plain lists,
    release through the handle, notifications by get and update, a standalone one; prepped
    postings with int32 and int64 index arrays, a str message, lists of mixed sizes)."""
    out_c, rows_c = _tap_tables(tmp_path / "c.kvtrace", True)
    out_py, rows_py = _tap_tables(tmp_path / "py.kvtrace", False)
    assert out_c == out_py
    for name in rows_py:
        assert rows_c[name] == rows_py[name], name
    assert [e["kind"] for e in rows_c["events"]].count("xfer_post") == 13


@pytest.mark.parametrize("native", [True, False])
def test_tap_records_the_indices_given_at_make(tmp_path, native):
    """A handle's descriptors are those of its makeXferReq call, even when the engine reuses its
    index arrays before the posting is flushed (the C tap keeps a handle's indices and addresses
    ungathered until the recorder's flush: a copy of the indices, the list's own addresses)."""
    if native and not hasattr(NATIVE_ROWS, "Take"):
        pytest.skip("the C tap is not built")
    path = tmp_path / "t.kvtrace"
    rec = Recorder(str(path), "main")

    def make(name, cfg):
        a = TracedAgent(name, cfg, recorder=rec)
        a.agent = BindingTap(a.agent._inner, a.name, rec, None, False, native=native)
        return a
    a, b = make("A", _cfg()), make("B", _cfg())
    src = (np.arange(8 * PAGE) % 251).astype(np.uint8)
    dst = np.zeros(8 * PAGE, np.uint8)
    _link(a, src, b, dst)
    loc = a.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    rem = a.prep_xfer_dlist("B", [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], "DRAM")
    li, ri = np.array([0, 1, 2], np.int32), np.array([5, 6, 7], np.int64)
    h = a.make_prepped_xfer("WRITE", loc, li, rem, ri, b"x")
    if native:
        (kept,) = [H.descs for H in a.agent._handles.values()]
        assert {type(v).__name__ for v in (kept[3], kept[4], kept[9], kept[11])} == {"Take"}
    li[:], ri[:] = [7, 6, 5], [0, 0, 0]   # the engine reuses its arrays
    a.transfer(h)
    assert _wait(a, h) == "DONE"
    a.release_xfer_handle(h)
    rec.close()
    rows = open_trace(str(path)).table("descs").to_pylist()
    assert [(d["pos"], d["src_addr"], d["dst_addr"], d["src_idx"], d["dst_idx"], d["nbytes"]) for d in rows] == \
        [(i, src.ctypes.data + i * PAGE, dst.ctypes.data + (5 + i) * PAGE, i, 5 + i, PAGE) for i in range(3)]


def test_trace_passes_validator(traced, validate_trace):
    validate_trace(traced[2])


def test_registrations_per_region(traced):
    _, t, _, sa, da = traced
    reg = [(e["agent"], e["addr"], e["nbytes"], e["mem_type"], e["device"]) for e in _events(t, "register")]
    assert reg == [("A", sa, 8 * PAGE, "DRAM", 0), ("B", da, 8 * PAGE, "DRAM", 0)]
    assert [(e["agent"], e["addr"]) for e in _events(t, "deregister")] == [("A", sa), ("B", da)]


def test_prepared_lists_recorded_once(traced):
    _, t, _, sa, da = traced
    dl = t.table("dlists").to_pylist()
    assert sorted({d["dlist"] for d in dl}) == [0, 1]
    loc = [d for d in dl if d["dlist"] == 0]
    rem = [d for d in dl if d["dlist"] == 1]
    assert [(d["agent"], d["remote_agent"], d["idx"], d["addr"]) for d in loc] == \
        [("A", None, i, sa + i * PAGE) for i in range(8)]
    assert [(d["agent"], d["remote_agent"], d["addr"]) for d in rem] == [("B", "B", da + i * PAGE) for i in range(8)]


def test_write_posted_twice_gets_two_xfers_with_descriptors(traced):
    _, t, _, sa, da = traced
    posts = [e for e in _events(t, "xfer_post") if e["agent"] == "A"]
    assert [e["xfer"] for e in posts] == [0, 1]
    assert all(e["request"] == "42" and e["msg"] == b"42_kv_0_1_0" and e["nbytes"] == 3 * PAGE for e in posts)
    assert json.loads(posts[0]["detail"]) == json.loads(posts[1]["detail"])  # same handle
    descs = [d for d in t.table("descs").to_pylist() if d["op"] == "WRITE"]
    for x in (0, 1):
        rows = [d for d in descs if d["xfer"] == x]
        assert [(d["pos"], d["src_agent"], d["src_addr"], d["dst_agent"], d["dst_addr"], d["nbytes"],
                 d["src_dlist"], d["src_idx"], d["dst_dlist"], d["dst_idx"]) for d in rows] == \
            [(i, "A", sa + i * PAGE, "B", da + (5 + i) * PAGE, PAGE, 0, i, 1, 5 + i) for i in range(3)]


def test_read_src_dst_follow_the_bytes(traced):
    _, t, _, sa, da = traced
    post = [e for e in _events(t, "xfer_post") if e["agent"] == "B"]
    assert len(post) == 1 and post[0]["peer"] == "A" and post[0]["request"] == "req-7"
    rows = [d for d in t.table("descs").to_pylist() if d["xfer"] == post[0]["xfer"]]
    assert [(d["op"], d["src_agent"], d["src_addr"], d["dst_agent"], d["dst_addr"], d["nbytes"], d["src_dlist"])
            for d in rows] == [("READ", "A", sa + 3 * PAGE, "B", da, 2 * PAGE, None)]


def test_completion_recorded_once_per_posting_with_telemetry(traced):
    _, t, _, _, _ = traced
    done = _events(t, "xfer_done")
    assert sorted(e["xfer"] for e in done) == [0, 1, 2]  # check_xfer_state polled many times
    assert all(e["status"] == "DONE" for e in done)
    tel = json.loads(done[0]["detail"])["telemetry"]
    assert tel["bytes"] == 3 * PAGE and tel["xfer_us"] >= 0
    assert sorted(e["xfer"] for e in _events(t, "xfer_release")) == [1, 2]  # release ends the last posting
    assert not _events(t, "xfer_error")


def test_notifications_one_per_message(traced):
    _, t, _, _, _ = traced
    recv = [(e["agent"], e["peer"], e["msg"], e["request"], e["xfer"]) for e in _events(t, "notif_recv")]
    assert recv == [("B", "A", b"42_kv_0_1_0", "42", None)] * 2 + [
        ("A", "B", b"req-7:1", "req-7", None), ("A", "B", b"42_aux", "42", None)]
    send = [(e["agent"], e["peer"], e["msg"], e["request"]) for e in _events(t, "notif_send")]
    assert send == [("B", "A", b"42_aux", "42")]
    seqs = {e["msg"]: e["seq"] for e in _events(t) if e["kind"] in ("notif_send",)}
    assert seqs[b"42_aux"] < [e["seq"] for e in _events(t, "notif_recv") if e["msg"] == b"42_aux"][0]


def test_explicit_request_context_wins_over_tags(tmp_path):
    rec = Recorder(str(tmp_path / "c.kvtrace"), "main")
    a, b = (TracedAgent(n, _cfg(), recorder=rec, request_tags="sglang") for n in ("A", "B"))
    a.add_remote_agent(b.get_agent_metadata())
    with rec.request("room-9"):
        a.send_notif("B", b"5_aux")
    a.send_notif("B", b"6_aux")
    a.send_notif("B", b"untagged")
    rec.close()
    assert [e["request"] for e in _events(open_trace(str(tmp_path / "c.kvtrace")), "notif_send")] == \
        ["room-9", "6", None]


def test_strided_prep_expands_in_nixl_order(tmp_path, validate_trace):
    """An Nx5 list's entry i is the one NIXL moves for index i (checked by moving bytes)."""
    rec = Recorder(str(tmp_path / "s.kvtrace"), "main")
    a, b = (TracedAgent(n, _cfg(), recorder=rec) for n in ("A", "B"))
    src = (np.arange(4096) % 249).astype(np.uint8)
    dst = np.zeros(4096, np.uint8)
    a.register_memory([(src.ctypes.data, 4096, 0, "")], "DRAM")
    b.register_memory([(dst.ctypes.data, 4096, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    strided = np.array([[src.ctypes.data, 128, 0, 512, 4], [src.ctypes.data + 2048, 128, 0, 128, 2]], np.uint64)
    loc = a.prep_xfer_dlist("", strided, "DRAM")
    rem = a.prep_xfer_dlist("B", [(dst.ctypes.data + i * 128, 128, 0) for i in range(6)], "DRAM")
    h = a.make_prepped_xfer("WRITE", loc, [5, 2], rem, [0, 1])
    a.transfer(h)
    assert _wait(a, h) == "DONE"
    rec.close()
    t = open_trace(str(tmp_path / "s.kvtrace"))
    entries = {d["idx"]: d["addr"] for d in t.table("dlists").to_pylist() if d["dlist"] == 0}
    assert len(entries) == 6
    for pos, i in enumerate([5, 2]):
        off = entries[i] - src.ctypes.data
        assert bytes(dst[pos * 128:(pos + 1) * 128]) == bytes(src[off:off + 128])
    validate_trace(tmp_path / "s.kvtrace")


@pytest.mark.parametrize("native", [True, False], ids=["c-tap", "python-tap"])
def test_post_to_a_destroyed_peer_records_error(tmp_path, validate_trace, native):
    """ERR path: the peer agent is gone when the handle is posted; NIXL raises, the trace
    shows the posting and its error, and the exception reaches the program unchanged
    (the tap's calls in C and in Python)."""
    rec = Recorder(str(tmp_path / "e.kvtrace"), "main")
    a, b = TracedAgent("A", _cfg(), recorder=rec), TracedAgent("B", _cfg(), recorder=rec)
    a.agent = BindingTap(a.agent._inner, a.name, rec, None, False, native=native)
    src, dst = np.ones(1024, np.uint8), np.zeros(1024, np.uint8)
    a.register_memory([(src.ctypes.data, 1024, 0, "")], "DRAM")
    rb = b.register_memory([(dst.ctypes.data, 1024, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    h = a.initialize_xfer("WRITE", a.get_xfer_descs([(src.ctypes.data, 1024, 0)], "DRAM"),
                          a.get_xfer_descs([(dst.ctypes.data, 1024, 0)], "DRAM"), "B", b"3_kv_0_1_0")
    b.deregister_memory(rb)
    del b
    gc.collect()
    with pytest.raises(Exception) as err:
        a.transfer(h)
    rec.close()
    assert "Disconnect" in type(err.value).__name__
    t = open_trace(str(tmp_path / "e.kvtrace"))
    kinds = [(e["kind"], e["xfer"], e["status"]) for e in _events(t) if e["kind"].startswith("xfer")]
    assert kinds == [("xfer_post", 0, None), ("xfer_error", 0, "ERR")]
    assert "REMOTE_DISCONNECT" in json.loads(_events(t, "xfer_error")[0]["detail"])["error"]
    validate_trace(tmp_path / "e.kvtrace")


def test_without_recorder_it_is_a_plain_agent(monkeypatch):
    monkeypatch.delenv("KVTRACE_TRACE_DIR", raising=False)
    a = TracedAgent("solo", _cfg())
    assert a.kvtrace_recorder is None
    assert type(a.agent).__name__ == "nixlAgent"


@pytest.mark.timeout(60)
def test_postings_the_tap_cannot_see_are_counted_by_reason(tmp_path):
    """A descriptor list prepared past the tap (here: straight on NIXL's binding) leaves
    the tap without descriptors for its postings: they still run, and are counted."""
    path = str(tmp_path / "u.kvtrace")
    rec = Recorder(path, "main")
    a = TracedAgent("A", _cfg(), recorder=rec)
    b = TracedAgent("B", _cfg(), recorder=rec)
    src = (np.arange(4 * PAGE) % 251).astype(np.uint8)
    dst = np.zeros(4 * PAGE, np.uint8)
    _link(a, src, b, dst)
    seen = a.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    rem = a.prep_xfer_dlist("B", [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    # the twin: a posting over lists the tap saw is traced
    h = a.make_prepped_xfer("WRITE", seen, [0], rem, [0], b"seen")
    a.transfer(h)
    assert _wait(a, h) == "DONE"
    # the same lists prepared while the tap was not in place (as before tracing started)
    tap, a.agent = a.agent, a.agent._inner
    try:
        unseen = a.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    finally:
        a.agent = tap
    for i in range(2):
        h2 = a.make_prepped_xfer("WRITE", unseen, [1 + i], rem, [1 + i], b"unseen")
        a.transfer(h2)
        assert _wait(a, h2) == "DONE"            # NIXL moved the bytes all the same
    a.release_dlist_handle(unseen)
    rec.close()
    assert dst[PAGE:3 * PAGE].tolist() == src[PAGE:3 * PAGE].tolist()
    t = open_trace(path)
    posts = [e for e in t.table("events").to_pylist() if e["kind"] == "xfer_post"]
    assert [e["msg"] for e in posts] == [b"seen"]
    notes = " ".join(t.notes)
    assert "2 transfer postings went to NIXL untraced (descriptor list prepared before tracing started: 2)" in notes


def test_lists_made_of_arrays_are_not_held(tmp_path):
    """The copies the tap keeps of get_xfer_descs' arrays go with their use: a list prepared
    (prep_xfer_dlist of an array: vLLM's and SGLang's prepared lists) or posted leaves none
    behind, and a list longer than a posting's is never copied (read back when used)."""
    from kvtrace.tracer import agent_tap
    rec = Recorder(str(tmp_path / "t.kvtrace"), "main")
    a, b = TracedAgent("A", _cfg(), recorder=rec), TracedAgent("B", _cfg(), recorder=rec)
    src, dst = np.zeros(8 * PAGE, np.uint8), np.zeros(8 * PAGE, np.uint8)
    _link(a, src, b, dst)
    rows = np.array([(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], np.uint64)
    a.prep_xfer_dlist("", rows, "DRAM")
    a.prep_xfer_dlist("B", np.array([(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(8)], np.int64), "DRAM")
    assert a.agent._made == {}
    h = a.initialize_xfer("WRITE", a.get_xfer_descs(rows[:2], "DRAM"),
                          a.get_xfer_descs(np.array([(dst.ctypes.data, PAGE, 0)] * 2, np.uint64), "DRAM"), "B")
    assert a.agent._made == {}
    a.release_xfer_handle(h)
    long = np.repeat(rows[:1], agent_tap._MADE_ROWS_MAX + 1, axis=0)
    a.get_xfer_descs(long, "DRAM")
    assert a.agent._made == {}
    rec.close()
