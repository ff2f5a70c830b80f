"""bench/paused_waves.py: which waves it compares. Twin reports (timing.wave_twins) compare
each recorded wave with the unrecorded wave that moved the same requests; older reports
compare an unrecorded wave with the recorded waves on either side of it."""
from __future__ import annotations

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "paused_waves.py")


@pytest.fixture(scope="module")
def pw():
    spec = importlib.util.spec_from_file_location("paused_waves", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _timing(thr, rec, twins):
    # one second busy a wave: its throughput is its bytes
    return {"wave_bytes": list(thr), "wave_busy_s": [1.0] * len(thr), "wave_recorded": list(rec),
            "wave_twins": twins}


def test_twins_compare_each_pair_whichever_goes_first(pw):
    # pairs (2,3) R U and (4,5) U R: 90/100 and 80/100; pair (0,1) is skipped (skip=2)
    t = _timing([1, 1, 90, 100, 100, 80], [True, False, True, False, False, True], twins=True)
    r, whole = pw.ratios(t, 2)
    assert r == pytest.approx([0.9, 0.8])
    assert whole == pytest.approx(170 / 200)


def test_neighbour_method_for_reports_without_twins(pw):
    # the same numbers read the old way: unrecorded wave 3 against waves 2 and 4's mean
    t = _timing([1, 1, 90, 100, 100, 80], [True, False, True, False, True, False], twins=False)
    r, _ = pw.ratios(t, 2)
    assert r == pytest.approx([(90 + 100) / 2 / 100])


def test_interval_is_printed_and_brackets_the_geometric_mean(pw):
    text = pw.describe([0.97, 0.98, 0.99, 0.975, 0.985])
    assert "geometric mean -2.00%" in text
    lo, hi = text.split("95% interval ")[1].split(")")[0].split(" to ")
    assert float(lo.rstrip("%")) < -2.0 < float(hi.rstrip("%"))


def test_report_without_unrecorded_waves_is_refused(pw):
    with pytest.raises(ValueError, match="no unrecorded wave"):
        pw.ratios(_timing([1, 2, 3], [True, True, True], twins=True), 0)


def test_driver_twins_move_the_same_shapes_and_alternate_order():
    import argparse
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    import sglang_pd
    base = argparse.Namespace(seed=7, requests=40, max_pages=48, wave=8, paused_waves=None)
    twin = argparse.Namespace(**dict(vars(base), paused_waves="all"))
    plain, paired = sglang_pd.waves(sglang_pd.workload(base), 8), sglang_pd.waves(sglang_pd.workload(twin), 8)
    shape = lambda w: [(r["pages"], r["chunks"]) for r in w]  # noqa: E731
    assert all(shape(paired[k]) == shape(paired[k + 1]) for k in range(0, 4, 2))
    assert shape(plain[0]) != shape(plain[1])        # unpaired runs keep their own draws
    assert [r["room"] for r in paired[1]] == [r["room"] for r in plain[1]]   # new rooms, same ids
    assert [sglang_pd.wave_recorded(w) for w in range(8)] == [True, False, False, True] * 2
