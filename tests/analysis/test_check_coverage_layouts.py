"""A check never reads "holds", and never finds a hazard, where no layout maps a transfer's end.

Descriptor ends become slots only through an agent's layouts. On the reference engine's
recordings with one side's layouts taken away (a layouts file lost, an integration without a
layout hook) or one layer's regions missing (a pool or layer the hook leaves out), the
checks that need that side's slots compared nothing there: they are skipped or "unknown",
with why. Before, the consumer's missing layouts gave 96 false buffer_class_not_sent errors
(no transfer seemed to carry any pool) and "holds" for the decode-side checks.
"""
from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.analysis.verdict import verdict

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces")
#: the checks that read the consumer's slots (decode: the destination of every transfer)
CONSUMER_SIDE = ("slot_reuse_before_read", "read_before_done", "read_undelivered", "write_after_free")
NO_LAYOUT = "describes no layout"


def _copy(tmp_path, name: str, shard: str | None = None, layer: int | None = None) -> str:
    """The committed trace ``name``, with ``shard``'s layouts removed (only ``layer``'s
    regions when given)."""
    dst = str(tmp_path / f"{name}.kvtrace")
    shutil.copytree(os.path.join(TRACES, f"{name}.kvtrace"), dst, ignore=shutil.ignore_patterns("_index"))
    if shard is not None:
        path = os.path.join(dst, shard, "layouts.arrows")
        with open(path, "rb") as f:
            t = ipc.open_stream(f).read_all()
        keep = pa.array([False] * t.num_rows) if layer is None else pa.array(
            [v != layer for v in t.column("layer").to_pylist()])
        t2 = t.filter(keep)
        assert t2.num_rows < t.num_rows
        with ipc.new_stream(path, t.schema) as w:
            w.write_table(t2)
    return dst


def _run(path):
    with TraceSession(path) as s:
        found = s.findings()
        v = verdict(s, found, ["none"])
        return found, v, dict(s.checks_skipped), dict(s.checks_partial)


def test_clean_twin_with_every_layout_holds(tmp_path):
    found, v, skipped, partial = _run(_copy(tmp_path, "engine-free-on-received"))
    assert found == [], [f.message for f in found]
    assert partial == {}
    for check in CONSUMER_SIDE + ("buffer_class_not_sent", "desc_not_owned", "layer_offset_mismatch"):
        assert v.checks[check] == "holds", (check, v.checks[check], skipped.get(check))


def test_consumer_without_layouts_finds_nothing_and_says_what_it_could_not_compare(tmp_path):
    found, v, skipped, partial = _run(_copy(tmp_path, "engine-free-on-received", shard="decode"))
    assert found == [], [f.message for f in found][:3]       # was 96 buffer_class_not_sent errors
    for check in CONSUMER_SIDE + ("desc_not_owned", "layer_offset_mismatch"):
        assert v.checks[check] == "skipped", (check, v.checks[check])
        assert NO_LAYOUT in skipped[check] and skipped[check].startswith("none of its "), skipped[check]
    assert "layout" in skipped["layout_mismatch"]
    # the producer's side is still mapped: its checks compare every transfer
    for check in ("src_free_before_done", "post_before_write"):
        assert v.checks[check] == "holds", (check, v.checks[check])


def test_bug_on_the_mapped_side_is_still_found(tmp_path):
    found, v, skipped, _ = _run(_copy(tmp_path, "engine-early-src-free", shard="decode"))
    assert "src_free_before_done" in {f.check for f in found}
    assert v.checks["src_free_before_done"] == "violated"
    assert {f.check for f in found} <= {"src_free_before_done", "checksum_mismatch"}, {f.check for f in found}
    assert NO_LAYOUT in skipped["slot_reuse_before_read"]


def test_producer_without_layouts_skips_its_side_with_why(tmp_path):
    found, v, skipped, partial = _run(_copy(tmp_path, "engine-early-src-free", shard="prefill"))
    assert "src_free_before_done" not in {f.check for f in found}
    assert v.checks["src_free_before_done"] == "skipped"
    assert "come from describes no layout" in skipped["src_free_before_done"], skipped["src_free_before_done"]
    assert v.checks["post_before_write"] == "skipped"
    assert not [f for f in found if f.check in CONSUMER_SIDE + ("buffer_class_not_sent",)], \
        [f.message for f in found][:3]


@pytest.mark.parametrize("name", ["engine-free-on-received", "engine-abort-free-inflight"])
def test_one_layer_missing_on_the_consumer_is_unknown_in_part(tmp_path, name):
    whole, v0, _, _ = _run(_copy(tmp_path / "whole", name))
    found, v, skipped, partial = _run(_copy(tmp_path / "cut", name, shard="decode", layer=1))
    # nothing new is claimed: what the layer-1 descriptors could not show is not a finding
    new = {(f.check, f.request) for f in found} - {(f.check, f.request) for f in whole}
    assert not new, new
    for check in ("slot_reuse_before_read", "read_before_done"):
        assert v.checks[check] in ("unknown", "violated"), (check, v.checks[check])
        assert " compared " in partial[check] and NO_LAYOUT in partial[check], partial[check]
