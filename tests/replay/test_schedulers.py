"""Each scheduler against clean and buggy scenario traces (symbolic executor)."""
import pytest

from kvtrace.replay.api import SCHEDULERS, make_executor, make_scheduler, run_graph
from kvtrace.replay.conflicts import conflict_index
from kvtrace.replay.graph import load


def failed(g, name, seed=0, depth=3):
    return run_graph(g, make_scheduler(name, seed, depth), make_executor()).verdict


def conflict_seeds(g):
    return range(len(conflict_index(g).pairs))


@pytest.mark.parametrize("name", ["clean", "clean_index_k", "prefix", "abort_fixed", "notify", "bytes_only"])
def test_clean_traces_verify_under_every_scheduler_and_many_seeds(scenario, name):
    g = load(scenario(name))
    for sched in SCHEDULERS:
        seeds = conflict_seeds(g) if sched == "conflicts" else range(25 if sched in ("random", "pct") else 1)
        for seed in seeds:
            v = failed(g, sched, seed)
            assert not v.failed, (sched, seed, v.lines(g))
            assert v.reads_verified or name == "bytes_only"


def test_prefix_sharing_reads_other_requests_pages_legally(scenario):
    g = load(scenario("prefix"))
    v = failed(g, "eager")
    assert v.reads_verified == 10 and not v.corrupted and v.recorded_differs == 0


def test_early_src_free_is_latent_lazy_and_conflicts_expose_it_eager_stays_clean(scenario):
    """early-src-free: prefill frees source pages at post; the next wave reuses them.
    The recording is clean (data moved at post); a late move reads the reused pages."""
    g = load(scenario("early_src_free"))
    assert not failed(g, "eager").failed
    assert not failed(g, "recorded").failed
    lazy = failed(g, "lazy")
    assert lazy.failed and lazy.stale_moves
    assert any("r2" in b.found or "r3" in b.found for b in lazy.corrupted)
    assert any(failed(g, "conflicts", s).failed for s in conflict_seeds(g))
    # random: measured ~70% of runs fail on this 8-request trace (278 of 400 seeds), so
    # fewer than 5 failures in 20 seeds has probability ~1e-6
    assert sum(failed(g, "random", s).failed for s in range(20)) >= 5


def test_decode_abort_late_write_is_exposed_by_conflicts_not_eager_or_lazy(scenario):
    """sglang #24527: decode aborts r1 and frees its pages; r1's late WRITE lands in r2's."""
    g = load(scenario("abort"))
    assert not failed(g, "eager").failed
    assert not failed(g, "lazy").failed      # the late move lands after r2's read
    hits = [s for s in conflict_seeds(g) if failed(g, "conflicts", s).failed]
    assert hits, "conflicts must flip r1's move past r2's move"
    v = failed(g, "conflicts", hits[0])
    assert {b.request for b in v.corrupted} == {"r2"}
    assert all(b.found.startswith("r1's bytes") for b in v.corrupted)
    # pct depth 3: measured 11% of runs find it (44 of 400 seeds; random: 5%), so 100
    # seeds all miss with probability 0.89**100 ~ 1e-5
    assert any(failed(g, "pct", s).failed for s in range(100))


def test_deferred_release_twin_is_clean_under_conflicts(scenario):
    g = load(scenario("abort_fixed"))
    assert not any(failed(g, "conflicts", s).failed for s in range(len(conflict_index(g).pairs) + 10))


def test_uniform_slot_count_corrupts_under_every_schedule(scenario):
    g = load(scenario("uniform"))
    for sched in SCHEDULERS:
        for seed in range(5):
            v = failed(g, sched, seed)
            assert v.failed and v.corrupted, (sched, seed)
            assert all(b.pool == "index_k" for b in v.corrupted)


def test_notify_before_data_fault_is_opt_in(scenario):
    """NIXL #252: the notification arrives before the data. Without the fault no
    schedule can read early; with it, lazy reads poison and eager stays clean."""
    path = scenario("notify")
    g = load(path)
    assert not failed(g, "lazy").failed
    gf = load(path, fault="notify-before-data")
    v = run_graph(gf, make_scheduler("lazy"), make_executor(), fault="notify-before-data").verdict
    assert v.failed and all(b.found.startswith("poison") for b in v.corrupted)
    assert not run_graph(gf, make_scheduler("eager"), make_executor()).verdict.failed


def test_bytes_only_trace_checks_source_as_at_post(scenario):
    """No reads recorded: a transfer must deliver its source as it was at post."""
    g = load(scenario("bytes_only_bug"))
    assert not g.cells[0]  # no slot events at all
    assert not failed(g, "eager").failed
    v = failed(g, "lazy")
    assert v.failed and v.stale_moves and not v.trace_has_reads


def test_out_of_bounds_descriptor_reported_and_never_executed(scenario):
    g = load(scenario("oob"))
    t = g.transfers[0]
    assert t.out_of_bounds == [1]
    assert any("outside the re-created memory" in n for n in g.notes)
    cells = {c for p in g.move_pieces[0] for c in (p[0], p[2])}
    assert all(g.mem.cells[c].addr + g.mem.cells[c].size <= 0x9000 + 1024 for c in cells if g.mem.cells[c].agent == "decode")
    assert failed(g, "eager").out_of_bounds == 1


def telemetry_trace(path, xfer_fraction):
    """Prefill reuses r1's source pages while r1's WRITE is in flight; the xfer_done
    carries NIXL telemetry saying the transfer took ``xfer_fraction`` of the time from
    post to the reuse."""
    import time

    from kvtrace.tracer.builder import TraceBuilder
    from kvtrace.tracer.schema import EventKind
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    d.alloc("r1", "kv", [5]); p.alloc("r1", "kv", [1]); p.write("r1", "kv", [1])
    x = p.post("r1", d, src=("kv", [1]), dst=("kv", [5]), msg=b"r1")
    t_post = time.monotonic_ns()
    p.free("r1", "kv", [1]); p.alloc("r2", "kv", [1])
    time.sleep(0.01)
    gap_us = (time.monotonic_ns() - t_post) / 1000
    p.write("r2", "kv", [1])
    p.rec.event(EventKind.XFER_DONE, "prefill", "r1", xfer=int(x), status="DONE",
                detail={"telemetry": {"post_us": 0, "xfer_us": gap_us * xfer_fraction}})
    d.notif_recv(p, b"r1"); d.read("r1", "kv", [5])
    return b.close()


def test_recorded_scheduler_moves_bytes_at_post_plus_measured_duration(tmp_path):
    slow = load(telemetry_trace(str(tmp_path / "slow.kvtrace"), 3.0))
    fast = load(telemetry_trace(str(tmp_path / "fast.kvtrace"), 0.01))
    assert slow.transfers[0].duration_ns > fast.transfers[0].duration_ns > 0
    assert failed(slow, "recorded").failed       # the bytes landed after the reuse
    assert not failed(fast, "recorded").failed   # they landed before it
    assert not failed(slow, "eager").failed


@pytest.mark.parametrize("depth", [2, 3, 5, 8])
def test_pct_has_exactly_d_minus_1_distinct_change_points(scenario, depth):
    """PCT's bound needs d-1 change points in every run; drawn independently they
    collided (about 28% of runs at k=20, d=5 lost one)."""
    from kvtrace.replay.schedulers import PctScheduler

    g = load(scenario("clean"))
    lowered_to = set(range(1, depth))
    for seed in range(300):
        s = PctScheduler(seed=seed, depth=depth)
        s.start(g, None)
        k = sum(1 for kind in g.col["kind"] if kind in ("write", "read", "xfer_post")) + len(g.move_xfer)
        assert k >= depth - 1
        assert len(s.change) == depth - 1 and set(s.change.values()) == lowered_to, (seed, s.change)
        assert all(1 <= step <= k for step in s.change)


def test_scheduler_registry_is_the_one_list():
    """CLI choices, the API's names and the registry agree; every name builds its class."""
    import argparse

    from kvtrace.replay import cli_explore, cli_replay
    from kvtrace.replay.schedulers import NAMES, REGISTRY

    assert SCHEDULERS == NAMES and all(make_scheduler(n).name == n == REGISTRY[n].name for n in NAMES)
    for mod in (cli_replay, cli_explore):
        p = argparse.ArgumentParser()
        mod.add_arguments(p)
        (act,) = [a for a in p._actions if a.dest == "scheduler"]
        assert tuple(act.choices) == NAMES
