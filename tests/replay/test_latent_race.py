"""The latent race only reordering exposes (engine bug ``free-on-received``): prefill
frees a request's source pages when decode acknowledges its "sent" status, which is not
ordered after the bytes. Clean as recorded and under the eager schedule; ``explore``
finds schedules that corrupt, ``minimize`` brings one to a single reordering, and under
``--what-if free-after-done`` no seed fails. The clean twin (same workload, no bug)
stays clean under the same search."""
import os

import pytest
from engine_recording import record_engine

from kvtrace.replay.api import make_executor, make_scheduler, replay, run_graph
from kvtrace.replay.exploration import explore
from kvtrace.replay.graph import load
from kvtrace.replay.minimization import minimize
from kvtrace.replay.schedule import decode
from kvtrace.replay.whatif.run import explore_whatif

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
COMMITTED = os.path.join(ROOT, "traces", "engine-free-on-received.kvtrace")
SEEDS = range(0, 200)


def _record(tmp, bug=None):
    return record_engine(str(tmp / f"small-tight-{bug or 'clean'}.kvtrace"), "small-tight", [bug] if bug else [])


@pytest.fixture(scope="module")
def race(tmp_path_factory):
    """A fresh recording (the engine makes the race) and the committed example."""
    tmp = tmp_path_factory.mktemp("latent")
    return {"fresh": _record(tmp, "free-on-received"), "clean": _record(tmp)}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("which", ["fresh", "committed"])
def test_latent_race_found_minimized_and_fixed(race, which):
    path = race["fresh"] if which == "fresh" else COMMITTED
    assert os.path.isdir(path), path
    g = load(path)
    assert g.manifest["engine"]["corrupted_pages"] == 0          # the engine's own verifier: clean
    for sched in ("recorded", "eager"):                           # and no schedule without reordering fails
        assert not run_graph(g, make_scheduler(sched), make_executor()).verdict.failed, sched
    ex = explore(g, "conflicts", SEEDS)
    assert ex.failing, "explore must find the race"
    m = minimize(g, decode(ex.first_schedule).decisions)
    assert m is not None and 1 <= len(m.flips) <= 2
    assert replay(path, schedule=m.schedule).verdict.failed        # the minimized string reproduces it
    w = explore_whatif(g, "free-after-done", "conflicts", SEEDS)
    assert len(w.before.failing) == len(ex.failing) and not w.after.failing


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_clean_twin_of_the_latent_race_stays_clean(race):
    g = load(race["clean"])
    assert not explore(g, "conflicts", SEEDS).failing
    assert not explore(g, "pct", range(0, 50)).failing
