"""What-if replay: each built-in fix removes the corruption of the bug it is for, and
leaves the clean twin of the same workload clean (tests as data)."""
import os
import subprocess
import sys

import pytest
from engine_recording import record_engine

from kvtrace.replay.graph import load
from kvtrace.replay.whatif import BUILTIN, apply, resolve
from kvtrace.replay.whatif.run import explore_whatif, replay_whatif

#: (bug injected, workload, what-if, scheduler, fault)
CASES = [
    ("uniform-slot-count", "small-mixed", "per-pool-slot-count", "recorded", None),
    ("early-src-free", "small", "free-after-done", "recorded", None),
    (None, "small", "status-after-data", "lazy", "notify-before-data"),
]


def _record(tmp, workload, bug):
    return record_engine(str(tmp / f"{workload}-{bug or 'clean'}.kvtrace"), workload, [bug] if bug else [])


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whatif")
    return lambda workload, bug=None: _record(tmp, workload, bug)


@pytest.mark.parametrize("bug,workload,fix,scheduler,fault", CASES, ids=[c[2] + "-" + (c[0] or c[4]) for c in CASES])
def test_fix_removes_the_corruption_and_keeps_the_clean_twin_clean(traces, bug, workload, fix, scheduler, fault):
    w = replay_whatif(traces(workload, bug), fix, scheduler, fault=fault)
    assert w.before.verdict.failed, "the bug must corrupt without the fix"
    assert not w.after.verdict.failed, w.after.verdict.lines(w.after.graph)
    assert w.after.verdict.reads_verified == w.before.verdict.reads_verified > 0
    assert w.forced <= 0 and w.fix.lines
    twin = replay_whatif(traces(workload), fix, scheduler)
    assert not twin.before.verdict.failed and not twin.after.verdict.failed


@pytest.mark.parametrize("fix", [f for f in BUILTIN if f != "per-pool-slot-count"])
def test_a_fix_for_another_bug_leaves_the_corruption(traces, fix):
    """A fix is not a blanket 'clean': the what-ifs unrelated to the slot-count bug keep it."""
    w = replay_whatif(traces("small-mixed", "uniform-slot-count"), fix)
    assert w.before.verdict.failed and w.after.verdict.failed


def test_fixed_graph_keeps_operation_ids_and_leaves_the_recorded_one_alone(traces):
    g = load(traces("small", "early-src-free"))
    cells = [list(c) if c else c for c in g.cells]
    f = apply(g, "free-after-done")
    assert (f.graph.n_prog, f.graph.n_ops) == (g.n_prog, g.n_ops)
    assert len(f.graph.mem.cells) > len(g.mem.cells)      # the next holders got other pages
    assert [list(c) if c else c for c in g.cells] == cells


def test_explore_under_the_fix_finds_nothing(traces):
    g = load(traces("small", "early-src-free"))
    e = explore_whatif(g, "free-after-done", "conflicts", range(0, 20))
    assert len(e.before.failing) == 20 and not e.after.failing


USER_FIX = '''
def notif_after_data(edit, args):
    """Like status-after-data, for transfer notifications only."""
    g = edit.graph
    for t in g.transfers:
        for o in t.observers:
            if g.col["kind"][o] == "notif_recv":
                for m in t.chunks:
                    edit.drop_wait(m, o)
                    edit.add_wait(o, m)
    edit.note("notifications after data" + (" " + args if args else ""))


def broken(edit, args):
    return edit.graph.transfers[10 ** 9]
'''


def test_user_what_if_from_a_file_and_the_cli(traces, tmp_path):
    p = tmp_path / "myfix.py"
    p.write_text(USER_FIX)
    path = traces("small")
    w = replay_whatif(path, f"{p}:notif_after_data:x", "lazy", fault="notify-before-data")
    assert w.before.verdict.failed and not w.after.verdict.failed and w.fix.lines == ["notifications after data x"]
    run = lambda *a: subprocess.run([sys.executable, "-m", "kvtrace", "replay", path, *a],  # noqa: E731
                                    capture_output=True, text=True, cwd=tmp_path)
    r = run("--scheduler", "lazy", "--fault", "notify-before-data", "--what-if", "myfix:notif_after_data")
    assert r.returncode == 0 and "before (the recorded program)" in r.stdout and "verdict: CORRUPTED" in r.stdout
    assert r.stdout.rstrip().splitlines()[-2].strip() == "verdict: clean"
    r = run("--scheduler", "lazy", "--fault", "notify-before-data", "--what-if", "free-after-done")
    assert r.returncode == 1                               # the wrong fix: still corrupted
    for bad in ("no-such-fix", "myfix:nope", "nomodule_xyz:f", "free-after-done:pools", "status-after-data:x",
                "myfix:broken"):
        r = run("--what-if", bad)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, bad


def test_resolve_lists_every_builtin_once():
    assert len(BUILTIN) == len(set(BUILTIN)) == 3
    for name in BUILTIN:
        assert resolve(name).name == name


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_seeds_geometry_production_dsv4(tmp_path):
    """The seeds' geometry (production-dsv4: bf16 index_k with its own slot count), fewer
    requests: uniform-slot-count corrupts index_k, per-pool-slot-count replays clean, and
    the same workload without the bug is left exactly as recorded."""
    pytest.importorskip("nixl._api")
    from kvtrace.tracer.engine import load as workload
    from kvtrace.tracer.engine import record
    wl = workload("production-dsv4", requests=40, concurrency=16)
    bug, clean = str(tmp_path / "bug.kvtrace"), str(tmp_path / "clean.kvtrace")
    assert record(wl, ["uniform-slot-count"], bug)["corrupted_pages"] > 0
    assert record(wl, [], clean)["corrupted_pages"] == 0
    w = replay_whatif(bug, "per-pool-slot-count")
    assert w.before.verdict.failed and not w.after.verdict.failed
    assert {b.pool for b in w.before.verdict.corrupted} == {"index_k"}
    twin = replay_whatif(clean, "per-pool-slot-count")
    assert not twin.after.verdict.failed and "nothing changes" in twin.fix.lines[0]


SGLANG = os.path.join(os.path.dirname(__file__), "data")


def test_real_sglang_driver_traces():
    """SGLang's own NIXL connector (tests/engines/sglang_pd.py, recorded with
    ``kvtrace record --hooks sglang``; bf16 index-K sized by bytes, the seeds' geometry):
    0.5.21 misaddresses index-K and per-pool-slot-count replays it clean; 0.5.23, which
    fixed the line, is already indexed per region and the what-if changes nothing."""
    old = os.path.join(SGLANG, "sglang-0.5.21-bf16-index-k.kvtrace")
    new = os.path.join(SGLANG, "sglang-0.5.23-bf16-index-k.kvtrace")
    if not (os.path.isdir(old) and os.path.isdir(new)):
        pytest.skip("SGLang traces not in tests/replay/data/")
    w = replay_whatif(old, "per-pool-slot-count")
    assert w.before.verdict.failed and not w.after.verdict.failed
    assert "re-indexed" in w.fix.lines[0]
    twin = replay_whatif(new, "per-pool-slot-count")
    assert not twin.before.verdict.failed and not twin.after.verdict.failed
    assert "nothing changes" in twin.fix.lines[0]


def test_real_sglang_fix_explores_clean_with_recorded_thread_order():
    """per-pool-slot-count re-addresses 0.5.21's index-K posts; a fixed post keeps its
    recorded place after the scheduler thread's writes of the slots it now reads (the
    transfer worker posts), as loading orders them. Regression: the waits were derived
    from the misaddressed slots only, and 21 of 30 pct seeds read poison under the fix."""
    old = os.path.join(SGLANG, "sglang-0.5.21-bf16-index-k.kvtrace")
    if not os.path.isdir(old):
        pytest.skip("SGLang traces not in tests/replay/data/")
    g = load(old)
    for sched in ("pct", "conflicts"):
        e = explore_whatif(g, "per-pool-slot-count", sched, range(0, 30))
        assert len(e.before.failing) == 30 and not e.after.failing, sched


TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces")
#: (committed trace, what-if, fixed?) -- explored with conflicts seeds 0:30 with and without it
EXPLORE_CASES = [
    ("engine-early-src-free", "free-after-done", True),
    ("engine-abort-free-inflight", "free-after-done", True),
    ("engine-notify-first-handle", "free-after-done", False),     # another bug: decode reads early
    ("engine-notify-first-handle", "status-after-data", False),
    ("engine-uniform-slot-count", "free-after-done", False),
]


@pytest.mark.parametrize("name,fix,fixed", EXPLORE_CASES, ids=[f"{c[0][7:]}-{c[1]}" for c in EXPLORE_CASES])
def test_explore_with_and_without_the_fix(name, fix, fixed):
    path = os.path.join(TRACES, name + ".kvtrace")
    if not os.path.isdir(path):
        pytest.skip("no committed trace")
    e = explore_whatif(load(path), fix, "conflicts", range(0, 30))
    assert e.before.failing
    assert (not e.after.failing) if fixed else e.after.failing


def test_explore_cli_says_before_and_after(capsys):
    from kvtrace.cli import main
    path = os.path.join(TRACES, "engine-early-src-free.kvtrace")
    assert main(["explore", path, "--scheduler", "conflicts", "--seeds", "0:20", "--no-progress",
                 "--what-if", "free-after-done"]) == 0
    assert "no failing schedule in 20 seeds under the fix; 20 without it" in capsys.readouterr().out
    assert main(["explore", path, "--scheduler", "conflicts", "--seeds", "0:5", "--no-progress",
                 "--what-if", "status-after-data"]) == 1
    out = capsys.readouterr().out
    assert "5 failing schedule(s) in 5 seeds under the fix; 5 without it" in out and "--what-if status-after-data" in out
