"""The symbolic executor and the byte executors (local copy, real NIXL) agree bit for bit."""
import pytest

from kvtrace.replay.api import make_executor, make_scheduler, run_graph
from kvtrace.replay.bytes_exec import ByteExecutor
from kvtrace.replay.graph import load

from conftest import SCENARIOS


def observed_checksums(o):
    return {op: o.executor.checksums(op, obs) for op, obs in o.result.reads.items()}


def agree(g, sched, seed, other):
    a = run_graph(g, make_scheduler(sched, seed), make_executor("symbolic"))
    b = run_graph(g, make_scheduler(sched, seed), other)
    assert a.result.order == b.result.order
    assert observed_checksums(a) == observed_checksums(b)
    # whose bytes (a mixed slot: the symbolic side lists every part, bytes the majority)
    who = lambda v: [(x.op, x.slot, x.found.replace("mixed: mostly ", "mixed: ").split(" (")[0])  # noqa: E731
                     for x in v.corrupted]
    assert who(a.verdict) == who(b.verdict)
    assert a.verdict.stale_moves == b.verdict.stale_moves
    assert a.verdict.failed == b.verdict.failed
    return a


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_symbolic_and_byte_executors_agree_on_every_scenario(scenario, name):
    g = load(scenario(name))
    for sched, seed in (("eager", 0), ("lazy", 0), ("random", 1), ("pct", 2), ("conflicts", 0)):
        agree(g, sched, seed, make_executor("bytes"))


def test_misaligned_copy_shows_in_both_executors(tmp_path):
    """A descriptor shifted by 16 bytes: words tagged with their offset give it away."""
    from kvtrace.tracer.builder import TraceBuilder
    b = TraceBuilder(str(tmp_path / "m.kvtrace"))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=4)
    p.alloc("r1", "kv", [0, 1]); d.alloc("r1", "kv", [2, 3]); p.write("r1", "kv", [0, 1])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[(sp.addr(0, 0) + 16, dp.addr(0, 2), 64), (sp.addr(0, 1), dp.addr(0, 3), 64)], msg=b"m")
    p.done(x); d.notif_recv(p, b"m"); d.read("r1", "kv", [2, 3])
    g = load(b.close())
    a = agree(g, "eager", 0, make_executor("bytes"))
    bad = a.verdict.corrupted
    assert [x.slot for x in bad] == [2] and "misaligned" in bad[0].found and "mixed" in bad[0].found


def test_copy_routine_is_pluggable(scenario):
    calls = []

    def copy(src, dst, ranges):
        calls.append(len(ranges))
        for so, do, n in ranges:
            dst[do:do + n] = src[so:so + n]
    g = load(scenario("early_src_free"))
    agree(g, "lazy", 0, ByteExecutor(copy=copy))
    assert len(calls) == len(g.move_xfer)


def test_nixl_executor_moves_bytes_through_real_agents(scenario):
    g = load(scenario("early_src_free"))
    ex = make_executor("nixl")
    a = agree(g, "lazy", 0, ex)
    assert a.verdict.failed and ex.nixl_xfers == len(g.move_xfer)
    ex2 = make_executor("nixl")
    assert not agree(g, "eager", 0, ex2).verdict.failed


def test_tensor_kernel_path_agrees_on_cpu_tensors(scenario):
    """The --device cuda code path (torch tensors + kvtrace.kernels.api), on CPU tensors."""
    pytest.importorskip("torch")
    g = load(scenario("early_src_free"))
    a = agree(g, "lazy", 0, ByteExecutor("torch-cpu"))
    assert a.verdict.failed


@pytest.mark.gpu
def test_cuda_byte_executor_agrees(scenario):
    g = load(scenario("early_src_free"))
    agree(g, "lazy", 0, make_executor("bytes", "cuda"))


def test_one_registration_spanning_every_layer_maps_to_layout_slots(tmp_path):
    """A single register() over a pool's layers (plus a prepped list over it) must not
    hide the layouts: moves and reads meet in the same slots."""
    from kvtrace.tracer.builder import TraceBuilder
    b = TraceBuilder(str(tmp_path / "r.kvtrace"))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        pool = side.pool("kv", layers=2, slot_bytes=64, num_slots=4, register=False)
        side.register(pool.base, pool.layers * pool.layer_stride)
    p.prep_dlist(["kv"]); p.prep_dlist(["kv"], remote=d)
    p.alloc("r1", "kv", [0, 1]); d.alloc("r1", "kv", [2, 3]); p.write("r1", "kv", [0, 1])
    x = p.post("r1", d, src=("kv", [0, 1]), dst=("kv", [2, 3]), msg=b"m")
    p.free("r1", "kv", [0, 1]); p.alloc("r2", "kv", [0, 1]); p.write("r2", "kv", [0, 1])
    p.done(x); d.notif_recv(p, b"m"); d.read("r1", "kv", [2, 3])
    g = load(b.close())
    assert all(g.mem.cells[c].pool == "kv" for ps in g.move_pieces for pc in ps for c in (pc[0], pc[2]))
    assert not agree(g, "eager", 0, make_executor("bytes")).verdict.failed
    assert agree(g, "lazy", 0, make_executor("bytes")).verdict.failed
