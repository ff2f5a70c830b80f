"""Folding as data: an overlap of two in-flight writes is a consequence of a layer-offset
mismatch exactly when one writer is the misaddressed request and the overlap is on a slot
its stray descriptors landed on (the uniform-slot-count bug's layer-1 copies land in pages
another request is receiving). Any other overlap stays its own root cause."""
from __future__ import annotations

import pytest

from kvtrace.analysis.findings import Finding, fold


def _f(check, request, slots, *, agent="decode", pool="index_k", other=None):
    return Finding(check=check, severity="error", agent=agent, request=request, pool=pool, layer=0,
                   slot=slots[0], events=[], count=1, message=check, slots=list(slots),
                   extra={"other": other} if other else {})


STRAY = _f("layer_offset_mismatch", "1028", [472, 473, 474, 675])


@pytest.mark.parametrize("overlap,folded", [
    (_f("overlapping_inflight_writes", "1028", [472, 473], other="1098"), True),   # the stray writer is one party
    (_f("overlapping_inflight_writes", "1098", [474], other="1028"), True),        # ... or the other
    (_f("overlapping_inflight_writes", "1028", [10, 11], other="1098"), False),    # not where it landed stray
    (_f("overlapping_inflight_writes", "1054", [472], other="1250"), False),       # neither writer misaddressed
    (_f("overlapping_inflight_writes", "1028", [472], other="1098", pool="kv"), False),    # another pool
    (_f("overlapping_inflight_writes", "1028", [472], other="1098", agent="prefill"), False),
])
def test_overlap_on_a_stray_slot_folds_into_the_mismatch(overlap, folded):
    out = fold([STRAY, overlap])
    assert [f.check for f in out] == (["layer_offset_mismatch"] if folded else ["layer_offset_mismatch", "overlapping_inflight_writes"])
    kept = [g["check"] for g in out[0].extra.get("folded", [])]
    assert kept == (["overlapping_inflight_writes"] if folded else [])


def test_clean_twin_overlap_stays_a_root_cause():
    """Without a mismatch the same overlap is reported as it is."""
    ov = _f("overlapping_inflight_writes", "1028", [472], other="1098")
    assert fold([ov]) == [ov]
