"""Replay on a partial trace is never confidently wrong: a slot-read the recorded writes and
transfers leave without its request's bytes is undecidable when the trace lost part of what
was recorded (here: the prefill shard's events stream cut at two thirds, as a crash mid-write
leaves it), not corrupted; wrong bytes a request's own recorded transfer delivered still decide."""
from __future__ import annotations

import os
import shutil

import pytest

from kvtrace.replay.api import replay

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces")


def _cut(tmp_path, name: str) -> str:
    """A copy of a committed trace with prefill's events stream cut short."""
    dst = str(tmp_path / (name + "-cut.kvtrace"))
    shutil.copytree(os.path.join(TRACES, name + ".kvtrace"), dst, ignore=shutil.ignore_patterns("_index"))
    ev = [os.path.join(d, "events.arrows") for d, _, fs in os.walk(dst) if "prefill" in d and "events.arrows" in fs]
    assert len(ev) == 1
    with open(ev[0], "r+b") as f:
        f.truncate(os.path.getsize(ev[0]) * 2 // 3)
    return dst


@pytest.mark.parametrize("name", ["engine-clean", "engine-free-on-received"])
def test_cut_clean_trace_is_not_called_corrupted(tmp_path, name):
    whole = replay(os.path.join(TRACES, name + ".kvtrace")).verdict
    assert not whole.failed and whole.undecidable == 0          # complete: everything decides
    cut = replay(_cut(tmp_path, name)).verdict
    assert not cut.failed                                        # was CORRUPTED: lost deliveries read as poison
    assert cut.undecidable > 0 and cut.reads_verified > 0
    assert cut.reads_verified + cut.undecidable == whole.reads_verified


def test_cut_buggy_trace_still_shows_the_corruption_its_prefix_holds(tmp_path):
    whole = replay(os.path.join(TRACES, "engine-early-src-free.kvtrace")).verdict
    cut = replay(_cut(tmp_path, "engine-early-src-free")).verdict
    assert whole.failed and whole.undecidable == 0
    assert cut.failed and 0 < len(cut.corrupted) <= len(whole.corrupted)
    assert cut.undecidable > 0
