"""The engine hook API (tracer/hooks.py): layouts, ownership, kvh64 checksums of real memory."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kvtrace.kernels.checksum import kvh64
from kvtrace.tracer import Recorder, open_trace
from kvtrace.tracer.hooks import KVHooks


def test_hooks_record_layouts_ownership_and_checksums(tmp_path, validate_trace):
    path = str(tmp_path / "h.kvtrace")
    rec = Recorder(path, "decode")
    kv = (np.arange(2 * 8 * 64) % 253).astype(np.uint8).reshape(2, 8, 64)
    h = KVHooks("decode", recorder=rec)
    h.layouts("kv", [kv[0].ctypes.data, kv[1].ctypes.data], [kv[0].nbytes] * 2, [64, 64], page_tokens=16, dtype="bf16")
    h.layout("kv_split", 0, kv[0].ctypes.data, 32, 8, part="K")
    h.req_start("7", aliases=["rid-abc"])
    h.alloc("7", "kv", [3, 5], pages=[0, 1])
    h.alloc("8", "kv", [3], shared=True)
    h.write("7", "kv", 1, [3, 5], data=kv[1])
    h.read("7", "kv", 1, [5], data=kv[1])
    h.msg_send("7", "prefill", "m1", b"pages 3,5")
    h.free("7", "kv", [3, 5], reason="finish")
    h.req_done("7")
    rec.close()
    validate_trace(path)
    t = open_trace(path)
    lay = t.table("layouts").to_pylist()
    assert [(r["pool"], r["layer"], r["addr"], r["slot_bytes"], r["num_slots"], r["part"]) for r in lay] == [
        ("kv", 0, kv[0].ctypes.data, 64, 8, None), ("kv", 1, kv[1].ctypes.data, 64, 8, None),
        ("kv_split", 0, kv[0].ctypes.data, 32, 8, "K")]
    ev = {e["kind"] if e["kind"] != "alloc" else f"alloc{e['seq']}": e for e in t.table("events").to_pylist()}
    assert json.loads(ev["req_start"]["detail"]) == {"aliases": ["rid-abc"]}
    allocs = [e for k, e in ev.items() if k.startswith("alloc")]
    assert [(e["request"], e["slots"], e["pages"], e["detail"]) for e in allocs] == [
        ("7", [3, 5], [0, 1], None), ("8", [3], [0], '{"shared":true}')]
    assert ev["write"]["checksums"] == [kvh64(kv[1, 3].tobytes()), kvh64(kv[1, 5].tobytes())]
    assert ev["read"]["checksums"] == [kvh64(kv[1, 5].tobytes())] and ev["read"]["layer"] == 1
    assert json.loads(ev["free"]["detail"]) == {"reason": "finish"}
    assert json.loads(ev["msg_send"]["detail"]) == {"id": "m1"} and ev["msg_send"]["peer"] == "prefill"


def test_hooks_are_noops_when_not_recording(monkeypatch):
    monkeypatch.delenv("KVTRACE_TRACE_DIR", raising=False)
    h = KVHooks("decode")
    assert not h.enabled
    h.layout("kv", 0, 0, 64, 8)
    h.write("1", "kv", 0, [1])  # no data needed: nothing is computed
    h.free("1", "kv", [1])


def test_write_needs_a_layout_or_checksums(tmp_path):
    rec = Recorder(str(tmp_path / "x.kvtrace"), "p")
    h = KVHooks("p", recorder=rec)
    with pytest.raises(ValueError, match="no layout"):
        h.write("1", "kv", 0, [1], data=np.zeros(64, np.uint8))
    h.write("1", "kv", 0, [1], checksums=[5])
    rec.close()
