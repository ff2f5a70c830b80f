"""minimize keeps a schedule's transport fault (the reorderings shrink, the fault
stays) and exits like replay: 1 corruption reproduced, 0 nothing corrupts, 2 bad input."""
import os

from kvtrace.cli import main
from kvtrace.replay.api import replay
from kvtrace.replay.graph import load
from kvtrace.replay.minimization import minimize
from kvtrace.replay.schedule import decode

CLEAN = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "engine-clean.kvtrace")


def test_fault_schedule_minimizes_with_the_fault_kept(capsys):
    o = replay(CLEAN, "lazy", fault="notify-before-data")
    assert o.verdict.failed
    g = load(CLEAN, 1, "notify-before-data")
    m = minimize(g, decode(o.schedule).decisions, 1, "notify-before-data")
    assert m is not None and 1 <= len(m.flips) <= 2 < m.original
    assert decode(m.schedule).fault == "notify-before-data"
    assert replay(CLEAN, schedule=m.schedule).verdict.failed
    assert main(["minimize", CLEAN, "--schedule", o.schedule]) == 1
    out = capsys.readouterr().out
    assert "fault notify-before-data kept" in out and "moved past" in out


def test_minimize_exit_codes_match_replay(capsys):
    fine = replay(CLEAN, "lazy")                     # no fault: this schedule is clean
    assert not fine.verdict.failed
    assert main(["minimize", CLEAN, "--schedule", fine.schedule]) == 0
    assert "nothing to minimize" in capsys.readouterr().out
    assert main(["replay", CLEAN, "--schedule", fine.schedule]) == 0
    assert main(["minimize", CLEAN, "--schedule", "kvs1:not-a-schedule"]) == 2
