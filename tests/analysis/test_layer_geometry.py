"""Pools whose layers differ in geometry (cases_layer_geometry.py): layout_mismatch and the
"Layout differences" answer compare layer by layer and name the layers, and a varied pool's
geometry is shown per layer. Guards the bug where each side's min() over a pool's layers
was compared: a layer stored differently hid behind layers that agree."""
from __future__ import annotations

import json

import pytest

from kvtrace.analysis.layouts import geometry
from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main

from analysis_cases import CASES


def _build(tmp_path, name, bug):
    path = str(tmp_path / f"{name}-{int(bug)}.kvtrace")
    CASES[name](path, bug=bug)
    return path


@pytest.mark.parametrize("name,differs", [("dtype_differs_on_one_layer", ["dtype"]),
                                          ("bytes_per_token_differs_on_one_layer", ["bytes_per_token"])])
def test_finding_names_the_layer_and_its_transfer(tmp_path, name, differs):
    path = _build(tmp_path, name, True)
    with TraceSession(path) as s:
        (f,) = s.findings()
        assert f.check == "layout_mismatch" and f.layer == 2 and f.count == 2
        assert f.extra["differs"] == differs
        assert "differs on 1 of the 4 layers both sides register: layer 2: " in f.message
        assert "of transfer x2 copy that layer from prefill to decode" in f.message
        # the event named is the post of the transfer that carries layer 2 (one per layer)
        (ev,) = f.events
        layers = s.execute("SELECT DISTINCT layer FROM end_hold WHERE shard = ? AND post_seq = ?",
                           [ev[0], ev[1]]).fetchall()
        assert layers == [(2,)]


def _layout_diff(path, capsys):
    main(["check", path, "--format", "json"])
    return json.loads(capsys.readouterr().out).get("layout_diff")


def test_layers_alike_on_both_sides_list_no_difference(tmp_path, capsys):
    """Layers of different geometry, the same on both sides: nothing to list, and the text
    output has no "Layout differences" section."""
    path = _build(tmp_path, "legal_per_layer_geometry", False)
    assert _layout_diff(path, capsys) is None
    assert main(["check", path]) == 0
    assert "Layout differences" not in capsys.readouterr().out


@pytest.mark.parametrize("name,bug,expect", [
    ("dtype_differs_on_one_layer", True, {"differs": ["dtype"], "consistent": False, "layers": "layer 2",
                                          "descs": 2}),
    ("bytes_per_token_differs_on_one_layer", True, {"differs": ["slot_bytes", "bytes_per_token"],
                                                    "consistent": False, "uneven": 2, "layers": "layer 2"}),
    # the clean twin: a head split on layer 2 only, every item inside decode's slot
    ("bytes_per_token_differs_on_one_layer", False, {"differs": ["slot_bytes", "bytes_per_token"],
                                                     "consistent": True, "head_split": "2", "layers": "layer 2"}),
])
def test_layout_differences_name_the_layers(tmp_path, capsys, name, bug, expect):
    (d,) = _layout_diff(_build(tmp_path, name, bug), capsys)
    for k, v in expect.items():
        assert d[k] == v, d
    assert d["common_layers"] == 4
    # the values of the differing layer, not of the pool's min()
    assert (d["src"]["slot_bytes"], d["dst"]["slot_bytes"]) == (("128", "128") if "dtype" in d["differs"] else ("128", "256"))


def test_dtype_twin_lists_nothing(tmp_path, capsys):
    assert _layout_diff(_build(tmp_path, "dtype_differs_on_one_layer", False), capsys) is None


def test_geometry_of_a_varied_pool_is_per_layer(tmp_path):
    with TraceSession(_build(tmp_path, "dtype_differs_on_one_layer", True)) as s:
        geo = geometry(s)
    p, d = geo[("prefill", "kv", "")], geo[("decode", "kv", "")]
    assert p["varies"] and p["regions"] == 4
    assert p["slot_bytes"] == "64 (layers 0-1), 128 (layer 2), 32 (layer 3)"
    assert p["dtype"] == "bf16" and p["num_slots"] == 8
    assert d["dtype"] == "bf16 (layers 0-1, 3), fp8 (layer 2)"


def test_diff_of_two_traces_shows_the_layer(tmp_path, capsys):
    a, b = _build(tmp_path, "dtype_differs_on_one_layer", False), _build(tmp_path, "dtype_differs_on_one_layer", True)
    assert main(["diff", a, b, "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)["layouts"]
    assert (row["agent"], row["pool"]) == ("decode", "kv")
    assert row["changed"] == {"dtype": ["bf16", "bf16 (layers 0-1, 3), fp8 (layer 2)"]}


def test_layers_differing_in_two_ways_are_listed_each(tmp_path, capsys):
    """Layers 0-1 fp8 on decode, layer 3 with twice the bytes per token on decode and
    descriptors of decode's item length: one finding for the class, each group of layers
    with its own geometry; the layout difference shows each field on its own layers."""
    import cases_layer_geometry as c

    path = str(tmp_path / "two-ways.kvtrace")
    dst = {**c.VARIED, 0: (64, 16, "fp8"), 1: (64, 16, "fp8"), 3: (64, 16, "bf16")}
    c._layerwise(*c._pair(path, c.VARIED, dst), item_len={3: 64})
    with TraceSession(path) as s:
        (f,) = s.findings()
    assert f.check == "layout_mismatch" and f.layer == 0 and f.count == 6
    assert f.extra["differs"] == ["dtype", "bytes_per_token"] and f.extra["uneven"] == 2
    assert "differs on 3 of the 4 layers both sides register: layers 0-1: prefill stores it as bf16" in f.message
    assert "; layer 3: prefill stores it as bf16 (32 B per slot" in f.message
    assert "of transfers x0, x1, x3 copy those layers" in f.message
    (d,) = _layout_diff(path, capsys)
    assert d["layers"] == "layers 0-1, 3" and not d["consistent"]
    assert d["field_layers"] == {"slot_bytes": "layer 3", "bytes_per_token": "layer 3", "dtype": "layers 0-1"}
    assert (d["src"]["dtype"], d["dst"]["dtype"]) == ("bf16", "fp8")
    assert (d["src"]["slot_bytes"], d["dst"]["slot_bytes"]) == ("32", "64")
