"""Scenario traces for replay tests, written with tracer/builder.py (recordings are clean
unless the name says otherwise: the builder models data moving at post)."""
import pytest

from kvtrace.replay.synth import pd_workload
from kvtrace.tracer.builder import TraceBuilder


def _pair(path):
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=12)
    return b, p, d


def prefix_sharing(path):
    """Legal prefix sharing on both sides: prefill r2 reuses r1's first page by reference;
    decode r3 holds a reference to r1's delivered first page."""
    b, p, d = _pair(path)
    p.alloc("r1", "kv", [0, 1]); p.write("r1", "kv", [0, 1])
    d.alloc("r1", "kv", [4, 5])
    x1 = p.post("r1", d, src=("kv", [0, 1]), dst=("kv", [4, 5]), msg=b"r1_kv")
    p.alloc("r2", "kv", [0], pages=[0], shared=True)
    p.alloc("r2", "kv", [2], pages=[1]); p.write("r2", "kv", [2])
    d.alloc("r2", "kv", [6, 7])
    x2 = p.post("r2", d, src=("kv", [0, 2]), dst=("kv", [6, 7]), msg=b"r2_kv")
    p.done(x1); p.done(x2)
    d.notif_recv(p, b"r1_kv"); d.notif_recv(p, b"r2_kv")
    d.read("r1", "kv", [4, 5]); d.read("r2", "kv", [6, 7])
    d.alloc("r3", "kv", [4], pages=[0], shared=True); d.read("r3", "kv", [4])
    p.free("r2", "kv", [0, 2]); p.free("r1", "kv", [0, 1])
    d.free("r1", "kv", [4, 5]); d.free("r2", "kv", [6, 7]); d.free("r3", "kv", [4])
    return b.close()


def abort_late_write(path, bug=True):
    """Decode aborts r1 and frees its pages while r1's WRITE is in flight; r2 gets the
    pages and a transfer of its own. With ``bug=False`` decode waits for r1's transfer
    (a notification) before freeing — the deferred-release fix (sglang #35049)."""
    b, p, d = _pair(path)
    d.alloc("r1", "kv", [5, 6]); d.msg_send(p, "r1/pages")
    p.msg_recv(d, "r1/pages"); p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x1 = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
    d.req_abort("r1")
    if not bug:
        d.notif_recv(p, b"r1_kv")
    d.free("r1", "kv", [5, 6], reason="abort")
    d.alloc("r2", "kv", [5, 6]); d.msg_send(p, "r2/pages")
    p.msg_recv(d, "r2/pages"); p.alloc("r2", "kv", [3, 4]); p.write("r2", "kv", [3, 4])
    x2 = p.post("r2", d, src=("kv", [3, 4]), dst=("kv", [5, 6]), msg=b"r2_kv")
    p.done(x2); d.notif_recv(p, b"r2_kv"); d.read("r2", "kv", [5, 6])
    p.done(x1)
    p.free("r1", "kv", [1, 2]); p.free("r2", "kv", [3, 4]); d.free("r2", "kv", [5, 6])
    return b.close()


def notify_then_read(path):
    """Decode reads right after the notification; prefill sees DONE later (clean)."""
    b, p, d = _pair(path)
    d.alloc("r1", "kv", [5, 6]); p.alloc("r1", "kv", [1, 2]); p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv"); d.read("r1", "kv", [5, 6])
    p.done(x); p.free("r1", "kv", [1, 2]); d.free("r1", "kv", [5, 6])
    return b.close()


def bytes_only(path, bug=False):
    """A NIXL program recorded without hooks: registered regions, raw descriptors, no
    layouts, reads or writes. With ``bug`` a second transfer overwrites the first one's
    source while it is in flight."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.register(0x1000, 4096); d.register(0x9000, 4096)
    x1 = p.post("r1", d, descs=[(0x1000, 0x9000, 256), (0x1100, 0x9100, 256)], msg=b"r1")
    if bug:
        x2 = d.post("r2", p, op="WRITE", descs=[(0x9800, 0x1000, 256)], msg=b"r2")
        d.done(x2); p.notif_recv(d, b"r2")
    p.done(x1); d.notif_recv(p, b"r1")
    return b.close()


def out_of_bounds(path):
    """A descriptor past the end of the registered destination (sglang #31295)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.register(0x1000, 4096); d.register(0x9000, 1024)
    x = p.post("r1", d, descs=[(0x1000, 0x9000, 256), (0x1100, 0x9380, 256)], msg=b"r1")
    p.done(x); d.notif_recv(p, b"r1")
    return b.close()


SCENARIOS = {
    "clean": lambda path: pd_workload(path, requests=12, concurrency=3),
    "clean_index_k": lambda path: pd_workload(path, requests=8, concurrency=2, index_k=True),
    "prefix": prefix_sharing,
    "early_src_free": lambda path: pd_workload(path, requests=8, concurrency=2, bug="early-src-free"),
    "uniform": lambda path: pd_workload(path, requests=6, concurrency=2, bug="uniform-slot-count"),
    "abort": abort_late_write,
    "abort_fixed": lambda path: abort_late_write(path, bug=False),
    "notify": notify_then_read,
    "bytes_only": bytes_only,
    "bytes_only_bug": lambda path: bytes_only(path, bug=True),
    "oob": out_of_bounds,
}
CLEAN = ("clean", "clean_index_k", "prefix", "abort_fixed", "notify", "bytes_only")


@pytest.fixture(scope="session")
def scenario(tmp_path_factory):
    """scenario(name) -> path of that trace (built once per session)."""
    made = {}

    def get(name):
        if name not in made:
            made[name] = SCENARIOS[name](str(tmp_path_factory.mktemp("replay") / f"{name}.kvtrace"))
        return made[name]
    return get
