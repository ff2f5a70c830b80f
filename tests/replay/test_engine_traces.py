"""Replay on traces of the reference engine (tracer/engine): recorded here, and any
example traces committed under traces/."""
import glob
import os

import pytest
from engine_recording import record_engine

from kvtrace.replay.api import SCHEDULERS, make_executor, make_scheduler, replay, run_graph
from kvtrace.replay.graph import load

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
COMMITTED = sorted(glob.glob(os.path.join(ROOT, "traces", "*.kvtrace")))


def record(tmp, *inject):
    return record_engine(str(tmp / ("engine-" + ("-".join(inject) or "clean") + ".kvtrace")), "small", inject)


@pytest.fixture(scope="module")
def engine_traces(tmp_path_factory):
    """The committed example traces when present, else fresh recordings."""
    tmp = tmp_path_factory.mktemp("engine")
    out = {}
    for name, inject in (("clean", ()), ("early-src-free", ("early-src-free",))):
        committed = os.path.join(ROOT, "traces", f"engine-{name}.kvtrace")
        out[name] = committed if os.path.isdir(committed) else record(tmp, *inject)
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_engine_clean_trace_verifies_under_every_scheduler(engine_traces, tmp_path, validate_trace):
    g = load(engine_traces["clean"])
    assert g.transfers and any(g.cells[i] for i in range(g.n_prog))
    for sched in SCHEDULERS:
        for seed in range(3):
            v = run_graph(g, make_scheduler(sched, seed), make_executor()).verdict
            assert not v.failed and v.reads_verified > 100, (sched, seed, v.lines(g))
            assert v.recorded_differs == 0     # replay's bytes = the engine's recorded checksums
    o = replay(engine_traces["clean"], "pct", 1, executor="bytes", out=str(tmp_path / "r.kvtrace"))
    assert not o.verdict.failed
    validate_trace(str(tmp_path / "r.kvtrace"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_engine_early_src_free_corrupts_and_executors_agree(engine_traces):
    """The engine frees prefill pages when prefill finishes, before posting: the next
    request's write lands first under every schedule (as its own verifier reports)."""
    g = load(engine_traces["early-src-free"])
    for sched in ("eager", "lazy", "pct"):
        a = run_graph(g, make_scheduler(sched, 0), make_executor())
        b = run_graph(g, make_scheduler(sched, 0), make_executor("bytes"))
        assert a.verdict.failed and b.verdict.failed
        assert len(a.verdict.corrupted) == len(b.verdict.corrupted)
    assert g.manifest.get("engine", {}).get("corrupted_pages", 1) > 0


@pytest.mark.slow
def test_example_traces_are_committed():
    assert COMMITTED, "traces/*.kvtrace"


# What each committed trace must do under replay, as data: True = the replay verifier
# finds corrupted pages.  "recorded"/"eager" replay the recorded data flow; "lazy" holds
# writes back; "conflicts_fails" is a conflicts-scheduler seed that must corrupt (None:
# no seed may, checked over CONFLICT_SEEDS; then pct seed 7 may not either, unless
# "pct7_fails" says otherwise).  A new trace under traces/ needs a row here.
EXPECT = {
    # clean: no schedule corrupts
    "engine-clean": dict(recorded=False, eager=False, lazy=False, conflicts_fails=None),
    # latent race (the engine's own verifier saw 0 corrupted pages): the recorded data
    # flow replays clean BY DESIGN; only a reordering exposes it (test_latent_race.py)
    "engine-free-on-received": dict(recorded=False, eager=False, lazy=True, conflicts_fails=2),
    # corrupted for real when recorded; held back past the next owner's read, the late
    # write of an aborted transfer is harmless (schedule-dependent)
    "engine-abort-free-inflight": dict(recorded=True, eager=True, lazy=False, conflicts_fails=0),
    "engine-early-src-free": dict(recorded=True, eager=True, lazy=True, conflicts_fails=0),
    "engine-notify-first-handle": dict(recorded=True, eager=True, lazy=True, conflicts_fails=0),
    "engine-uniform-slot-count": dict(recorded=True, eager=True, lazy=True, conflicts_fails=0),
    # SGLang's head-sliced hetero TP recorded on a GPU (legal: the driver's verifier saw every
    # head slice in place): each decode page is assembled from per-token head slices of one
    # source page (other slot sizes on each side), verified slice by slice (replay/assembled.py).
    # The hooks record prefill's KV write on the scheduler thread and its post on the transfer
    # worker (the hand-off queue is not in the trace); the post keeps its recorded place after
    # the write (test_thread_handoff.py), so pct 7 no longer reads never-written poison
    "sglang-hetero-tp-heads-vram": dict(recorded=False, eager=False, lazy=False, conflicts_fails=None),
    "sglang-hetero-tp-heads-p2d1-vram": dict(recorded=False, eager=False, lazy=False, conflicts_fails=None),
    "sglang-hetero-tp-heads-p2d1-aux-vram": dict(recorded=False, eager=False, lazy=False, conflicts_fails=None),
}
# SGLang's own NIXL connector on CPU (tests/replay/data; bf16 index-K sized by bytes, see
# test_whatif.py), recorded with the hooks' status hand-off (update_status -> the poll that
# sees it, a msg_send/msg_recv pair within one agent: docs/hooks.md): 0.5.21 misaddresses
# index-K under every schedule; 0.5.23 is clean under every schedule. (The traces recorded
# before the hand-off read poison on 0.5.23 under lazy, pct 7 and every conflicts seed:
# decode's read on the forward thread was not ordered after the status its bootstrap
# thread received; see tests/engines/test_sglang_handoff.py.)
DATA = os.path.join(os.path.dirname(__file__), "data")
DATA_EXPECT = {
    "sglang-0.5.21-bf16-index-k": dict(recorded=True, eager=True, lazy=True, conflicts_fails=0, pct7_fails=True),
    "sglang-0.5.23-bf16-index-k": dict(recorded=False, eager=False, lazy=False, conflicts_fails=None),
}
CONFLICT_SEEDS = range(30)


def test_every_committed_trace_has_expectations():
    names = {os.path.basename(p)[:-len(".kvtrace")] for p in COMMITTED}
    assert names == set(EXPECT), "traces/*.kvtrace and EXPECT disagree"


@pytest.mark.parametrize("path", COMMITTED, ids=[os.path.basename(p) for p in COMMITTED])
def test_committed_example_traces_replay_deterministically(path):
    check_expected(path, EXPECT[os.path.basename(path)[:-len(".kvtrace")]])


@pytest.mark.parametrize("name", sorted(DATA_EXPECT))
def test_sglang_driver_traces_replay_as_expected(name):
    path = os.path.join(DATA, name + ".kvtrace")
    if not os.path.isdir(path):
        pytest.skip("SGLang traces not in tests/replay/data/")
    check_expected(path, DATA_EXPECT[name])


def check_expected(path, want):
    a = replay(path, "pct", 7)
    b = replay(path, "pct", 7)
    assert a.schedule == b.schedule and a.verdict.signature() == b.verdict.signature()
    g = a.graph
    got = {s: run_graph(g, make_scheduler(s), make_executor()).verdict
           for s in ("recorded", "eager", "lazy")}
    assert {s: v.failed for s, v in got.items()} == {s: want[s] for s in got}, \
        {s: v.lines(g) for s, v in got.items()}
    seed = want["conflicts_fails"]
    if "pct7_fails" in want or seed is None:
        assert a.verdict.failed == want.get("pct7_fails", False), a.verdict.lines(g)
    if seed is None:
        assert not any(run_graph(g, make_scheduler("conflicts", s), make_executor()).verdict.failed
                       for s in CONFLICT_SEEDS)
    else:
        assert run_graph(g, make_scheduler("conflicts", seed), make_executor()).verdict.failed
    eng = g.manifest.get("engine") or {}
    if got["recorded"].failed and "attribution" in eng:
        # the recorded data flow finds the pages the engine's own verifier counted
        att, n = eng["attribution"], len(got["recorded"].corrupted)
        assert att.get("another request's bytes", 0) + att.get("never written (poison)", 0) \
            <= n <= eng["corrupted_pages"]
