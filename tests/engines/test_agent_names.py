"""Agent names given as bytes or str record the same.

nixl 1.5.1's ``add_remote_agent`` returns the peer's name as bytes (annotated ``str``) and
vLLM passes it on to ``prep_xfer_dlist`` / ``initialize_xfer`` / ``send_notif``. A trace
must hold every list, descriptor and notification either way, with the name as text.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

nixl_api = pytest.importorskip("nixl._api")

from kvtrace.tracer import Recorder, open_trace  # noqa: E402
from kvtrace.tracer.agent import TracedAgent  # noqa: E402

PAGE = 128


def run(tmp_path, as_bytes: bool) -> dict:
    rec = Recorder(str(tmp_path / f"n{int(as_bytes)}.kvtrace"), "main")
    cfg = nixl_api.nixl_agent_config(backends=["UCX"])
    a, b = TracedAgent("A", cfg, recorder=rec), TracedAgent("B", cfg, recorder=rec)
    src = (np.arange(4 * PAGE) % 251).astype(np.uint8)
    dst = np.zeros(4 * PAGE, np.uint8)
    ra = a.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    rb = b.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    peer = a.add_remote_agent(b.get_agent_metadata())  # bytes in nixl 1.5.1
    b.add_remote_agent(a.get_agent_metadata())
    peer = peer if isinstance(peer, bytes) else peer.encode()
    name = peer if as_bytes else peer.decode()
    loc = a.prep_xfer_dlist("", [(src.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    rem = a.prep_xfer_dlist(name, [(dst.ctypes.data + i * PAGE, PAGE, 0) for i in range(4)], "DRAM")
    h = a.make_prepped_xfer("WRITE", loc, [0, 1], rem, [2, 3], b"7_kv_0_1_0")
    a.transfer(h)
    ld = a.get_xfer_descs([(src.ctypes.data + 2 * PAGE, PAGE, 0)], "DRAM")
    rd = a.get_xfer_descs([(dst.ctypes.data, PAGE, 0)], "DRAM")
    h2 = a.initialize_xfer("WRITE", ld, rd, name, b"8_kv_0_1_0")
    a.transfer(h2)
    for x in (h, h2):
        while a.check_xfer_state(x) == "PROC":
            pass
    a.send_notif(name, b"9_aux")
    deadline = time.time() + 10
    got = 0
    while got < 3 and time.time() < deadline:
        got += sum(len(v) for v in b.get_new_notifs().values())
    a.release_xfer_handle(h)
    a.release_xfer_handle(h2)
    a.deregister_memory(ra)
    b.deregister_memory(rb)
    rec.close()
    t = open_trace(str(tmp_path / f"n{int(as_bytes)}.kvtrace"))
    ev = t.table("events").to_pylist()
    return {"descs": [(d["src_agent"], d["dst_agent"], d["nbytes"]) for d in t.table("descs").to_pylist()],
            "dlists": sorted({(d["dlist"], d["agent"], d["remote_agent"]) for d in t.table("dlists").to_pylist()}),
            "posts": [(e["agent"], e["peer"], e["request"]) for e in ev if e["kind"] == "xfer_post"],
            "notifs": sorted((e["kind"], e["agent"], e["peer"], e["msg"]) for e in ev
                             if e["kind"] in ("notif_send", "notif_recv")),
            "lost": rec.dropped_rows, "received": got}


def test_bytes_and_str_agent_names_record_the_same(tmp_path):
    as_str, as_bytes = run(tmp_path, False), run(tmp_path, True)
    assert as_bytes == as_str
    assert as_str["lost"] == 0 and as_str["received"] == 3
    assert len(as_str["descs"]) == 3 and {d[1] for d in as_str["descs"]} == {"B"}
    assert as_str["dlists"] == [(0, "A", None), (1, "B", "B")]
    assert as_str["posts"] == [("A", "B", "7"), ("A", "B", "8")]
    assert ("notif_send", "A", "B", b"9_aux") in as_str["notifs"]
