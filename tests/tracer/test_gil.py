"""tracer/gil.py: the recorder's background jobs run with a short GIL switch interval and
leave the program's own interval as they found it (or as the program set it meanwhile)."""
from __future__ import annotations

import sys
import threading

import pytest

from kvtrace.tracer import gil


@pytest.fixture
def interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield
    sys.setswitchinterval(old)


def test_short_while_a_job_runs_then_restored(interval):
    with gil.yielding(0.0002):
        assert sys.getswitchinterval() == pytest.approx(0.0002)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_overlapping_jobs_restore_once_the_last_ends(interval):
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def a():
        with gil.yielding(0.0002):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    t = threading.Thread(target=a)
    t.start()
    a_in.wait(5)
    with gil.yielding(0.0002):
        b_in.set()
        a_out.wait(5)
        assert sys.getswitchinterval() == pytest.approx(0.0002)   # job a ended, this one still runs
    t.join(5)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_value_the_program_sets_meanwhile_is_kept(interval):
    with gil.yielding(0.0002):
        sys.setswitchinterval(0.001)
    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_never_raises_the_interval_and_zero_leaves_it(interval):
    sys.setswitchinterval(0.0001)
    with gil.yielding(0.0002):
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    with gil.yielding(0):
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    assert sys.getswitchinterval() == pytest.approx(0.0001)
