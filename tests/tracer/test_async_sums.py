"""Page checksums hashed off the critical path (tracer/async_sums.py, Recorder.write_async):
the write event is ordered when the hook runs, its checksums land when the hash is done,
and the barriers (alloc/free of the slots, the end of a transfer that read them, close, a
ring dump) make the hash see the bytes the engine wrote."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from kvtrace.kernels.checksum import kvh64_ranges, kvh64_rows
from kvtrace.tracer import Recorder, open_trace
from kvtrace.tracer.schema import EventKind as K

ITEM, SLOTS = 512, 8


class Region:   # what the integrations know of a registered region
    def __init__(self, pool, layer, buf):
        self.pool, self.layer, self.buf = pool, layer, buf
        self.ptr, self.item, self.slots, self.mem, self.device = buf.ctypes.data, ITEM, SLOTS, "DRAM", 0


def _regions():
    rng = np.random.default_rng(3)
    return [Region("kv", layer, rng.integers(0, 256, ITEM * SLOTS, dtype=np.uint8)) for layer in range(2)]


def _sums(reg, slots):
    return [int(x) for x in kvh64_rows(reg.buf.reshape(SLOTS, ITEM)[slots])]


def _events(path):
    return open_trace(str(path)).table("events").to_pylist()


class Gate:
    """A hash that waits for the test to let it run (as a hashing thread behind the engine)."""

    def __init__(self, regs, slots):
        self.go, self.regs, self.slots = threading.Event(), regs, slots

    def __call__(self):
        assert self.go.wait(30)
        return [_sums(r, self.slots) for r in self.regs]


def test_write_ordered_at_the_hook_checksums_filled_in_later(tmp_path):
    regs = _regions()
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p", flush_interval=3600)
    rec.event(K.REQ_START, "A", "r1")
    gate = Gate(regs, [1, 2])
    seqs = rec.write_async("A", "r1", [("kv", 0), ("kv", 1)], [1, 2], gate, pages=[0, 1])
    rec.event(K.MARK, "A", detail={"text": "after the write"})
    rec.flush()   # the hash is not done: only what precedes the write is written
    assert [e["kind"] for e in _events(tmp_path / "t.kvtrace")] == ["req_start"]
    gate.go.set()
    rec.close()
    ev = _events(tmp_path / "t.kvtrace")
    assert [e["seq"] for e in ev] == [0, 1, 2, 3] and seqs == [1, 2]
    writes = [e for e in ev if e["kind"] == "write"]
    assert [(w["layer"], w["slots"], w["pages"], w["checksums"]) for w in writes] == \
        [(r.layer, [1, 2], [0, 1], _sums(r, [1, 2])) for r in regs]
    assert ev[-1]["kind"] == "mark"


def test_record_writes_gives_the_synchronous_hash_bits(writes_both_ways):
    """The same pages recorded through the hashing thread and in the hook: same events."""
    regs = _regions()
    got = writes_both_ways(regs, [7, 0, 3], [0, 1, 2])
    assert got["async"] == got["sync"]
    assert got["async"][1][3] == [int(x) for x in kvh64_ranges(regs[1].buf, np.array([7, 0, 3]) * ITEM, ITEM)]


def test_a_failed_hash_is_recorded_unknown_with_its_reason(tmp_path, capsys):
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p")

    def broken():
        raise ValueError("slot 99 outside a region of 8 slots")
    rec.write_async("A", "r1", [("kv", 0)], [99], broken)
    ok = Gate(_regions()[:1], [2])
    ok.go.set()
    rec.write_async("A", "r2", [("kv", 0)], [2], ok)    # the twin: hashed fine
    rec.close()
    w1, w2 = _events(tmp_path / "t.kvtrace")
    assert w1["checksums"] is None and w1["slots"] == [99]
    assert json.loads(w1["detail"])["checksums"].startswith("unknown: hashing failed (ValueError: slot 99")
    assert w2["checksums"] == _sums(_regions()[0], [2]) and w2["detail"] is None
    assert "page checksums could not be computed" in capsys.readouterr().err


def test_free_and_alloc_wait_for_the_hash_of_their_slots(tmp_path):
    """A freed slot may be rewritten at once: the free returns only after the hash read it."""
    regs = _regions()
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p")
    gate = Gate(regs[:1], [4])
    rec.write_async("A", "r1", [("kv", 0)], [4], gate)
    other = threading.Thread(target=rec.free, args=("A", "r9", "kv", [5]))   # the twin: another slot
    other.start()
    other.join(30)
    assert not other.is_alive()
    freer = threading.Thread(target=rec.free, args=("A", "r1", "kv", [4]))
    freer.start()
    freer.join(0.3)
    assert freer.is_alive()   # cannot return: the hash of slot 4 has not run
    want = _sums(regs[0], [4])
    gate.go.set()
    freer.join(30)
    regs[0].buf[4 * ITEM:5 * ITEM] = 0xEE   # the next owner writes the slot
    rec.close()
    ev = _events(tmp_path / "t.kvtrace")
    assert [e["kind"] for e in ev] == ["write", "free", "free"]
    assert ev[0]["checksums"] == want != _sums(regs[0], [4])


def test_a_page_rewritten_before_its_hash_is_unknown_not_wrong(tmp_path):
    """A later write on the slot (no free between: the bug kvtrace looks for) while the
    earlier hash is pending: that hash may see the new bytes, so it says unknown and why.
    Its other layer and a write to another slot keep their checksums."""
    regs = _regions()
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p")
    gate = Gate(regs, [1, 2])
    rec.write_async("A", "r1", [("kv", 0), ("kv", 1)], [1, 2], gate)
    rec.write("A", "r2", "kv", 0, [2], [123])       # rewrites slot 2 of layer 0
    rec.write("A", "r3", "kv", 0, [5], [456])       # another slot: no effect
    gate.go.set()
    rec.close()
    ev = _events(tmp_path / "t.kvtrace")
    l0, l1 = ev[0], ev[1]
    assert l0["checksums"] is None
    assert json.loads(l0["detail"])["checksums"] == \
        "unknown: page rewritten (by request r2) before its checksum was taken"
    assert l1["checksums"] == _sums(regs[1], [1, 2])
    assert [e["checksums"] for e in ev[2:]] == [[123], [456]]


def test_ring_dump_waits_for_pending_hashes(tmp_path):
    from kvtrace.tracer.ring import RingRecorder
    regs = _regions()
    rec = RingRecorder(str(tmp_path / "s.kvtrace"), "p", ring="30s", tail_s=0, signals=False)
    try:
        gate = Gate(regs[:1], [3])
        rec.write_async("A", "r1", [("kv", 0)], [3], gate)
        threading.Timer(0.2, gate.go.set).start()
        dump = rec.dump_now("test")
    finally:
        rec.close()
    ev = [e for e in open_trace(dump).table("events").to_pylist() if e["kind"] == "write"]
    assert [e["checksums"] for e in ev] == [_sums(regs[0], [3])]


def test_a_write_transfer_is_reported_done_only_after_its_source_pages_were_hashed(tmp_path):
    """The engine hears that a WRITE it posted is done (and may reuse its source pages)
    only once the hashes asked for before the posting are done; a READ (our pages are its
    destination) does not wait. Real NIXL agents over UCX on DRAM."""
    nixl_api = pytest.importorskip("nixl._api")
    from kvtrace.tracer.agent import TracedAgent
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p")
    cfg = nixl_api.nixl_agent_config(backends=["UCX"])
    a, b = TracedAgent("A", cfg, recorder=rec), TracedAgent("B", cfg, recorder=rec)
    regs = _regions()
    src, dst = regs[0].buf, np.zeros(ITEM * SLOTS, np.uint8)
    ra = a.register_memory([(src.ctypes.data, src.nbytes, 0, "")], "DRAM")
    rb = b.register_memory([(dst.ctypes.data, dst.nbytes, 0, "")], "DRAM")
    a.add_remote_agent(b.get_agent_metadata())
    b.add_remote_agent(a.get_agent_metadata())
    gate = Gate(regs[:1], [0])
    rec.write_async("A", "r1", [("kv", 0)], [0], gate)

    def transfer(agent, op, local, remote, peer, out):
        h = agent.initialize_xfer(op, agent.get_xfer_descs([local], "DRAM"), agent.get_xfer_descs([remote], "DRAM"),
                                  peer, b"")
        state = agent.transfer(h)
        while state == "PROC":
            state = agent.check_xfer_state(h)
        out.append(state)

    got_read: list = []   # the twin: B reads A's page 1 into its page 1 while the hash is held
    transfer(b, "READ", (dst.ctypes.data + ITEM, ITEM, 0), (src.ctypes.data + ITEM, ITEM, 0), "A", got_read)
    assert got_read == ["DONE"]
    got: list = []
    writer = threading.Thread(target=transfer, args=(a, "WRITE", (src.ctypes.data, ITEM, 0),
                                                     (dst.ctypes.data, ITEM, 0), "B", got))
    writer.start()
    writer.join(0.5)
    assert writer.is_alive() and got == []   # done on the wire, not yet told: page 0 is being hashed
    gate.go.set()
    writer.join(30)
    assert got == ["DONE"]
    a.deregister_memory(ra)
    b.deregister_memory(rb)
    rec.close()
    ev = _events(tmp_path / "t.kvtrace")
    write = next(e for e in ev if e["kind"] == "write")
    assert write["checksums"] == _sums(regs[0], [0])
    post, done = (next(e for e in ev if e["agent"] == "A" and e["kind"] == k) for k in ("xfer_post", "xfer_done"))
    assert write["seq"] < post["seq"] < done["seq"]


def test_deregistering_memory_waits_for_its_hashes(tmp_path):
    """An engine frees its pools after deregistering them: no hash may read them later."""
    nixl_api = pytest.importorskip("nixl._api")
    from kvtrace.tracer.agent import TracedAgent
    rec = Recorder(str(tmp_path / "t.kvtrace"), "p")
    a = TracedAgent("A", nixl_api.nixl_agent_config(backends=["UCX"]), recorder=rec)
    regs = _regions()
    ra = a.register_memory([(regs[0].ptr, regs[0].buf.nbytes, 0, "")], "DRAM")
    gate = Gate(regs[:1], [6])
    rec.write_async("A", "r1", [("kv", 0)], [6], gate)
    dereg = threading.Thread(target=a.deregister_memory, args=(ra,))
    dereg.start()
    dereg.join(0.3)
    assert dereg.is_alive()
    gate.go.set()
    dereg.join(30)
    assert not dereg.is_alive()
    rec.close()
    ev = _events(tmp_path / "t.kvtrace")
    assert [e["kind"] for e in ev] == ["register", "write", "deregister"]
    assert ev[1]["checksums"] == _sums(regs[0], [6])
