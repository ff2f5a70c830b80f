"""Sweep: the corrupted-request rate from trace checksums (clean twin: zero), the
outputs it writes, and a real sweep of the small preset through the reference engine."""
from __future__ import annotations

import json

import pytest

from kvtrace.analysis.report_sweep import write_sweep_outputs
from kvtrace.analysis.sweep import Point, check_point
from kvtrace.cli import main
from kvtrace.tracer.builder import TraceBuilder


def wrong_layer_trace(path, bug: bool):
    """Two requests pushed prefill → decode; with ``bug`` r2's layer-1 bytes come from
    layer 0 (a wrong layer stride), so decode reads r2's layer 1 with layer-0 content."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for r, ps, ds in (("r1", [1], [4]), ("r2", [2], [5])):
        d.alloc(r, "kv", ds)
        d.msg_send(p, f"dst-{r}", request=r)   # decode tells prefill its pages: the HB edge
        p.msg_recv(d, f"dst-{r}", request=r)
        p.alloc(r, "kv", ps)
        p.write(r, "kv", ps)
        src = ("kv", ps, [0, 0]) if (bug and r == "r2") else ("kv", ps, [0, 1])
        x = p.post(r, d, src=src, dst=("kv", ds, [0, 1]), msg=r.encode())
        p.done(x)
        d.notif_recv(p, r.encode())
        d.read(r, "kv", ds)
        d.free(r, "kv", ds)
        p.free(r, "kv", ps)
    return b.close()


@pytest.mark.parametrize("bug, corrupted", [(False, 0), (True, 1)])
def test_corrupted_requests_from_trace_checksums(tmp_path, bug, corrupted):
    r = check_point(wrong_layer_trace(str(tmp_path / "t.kvtrace"), bug))
    assert (r["requests"], r["corrupted"], r["source"]) == (2, corrupted, "trace-checksums")
    if not bug:
        assert r["findings"] == {}
    else:
        assert "layer_offset_mismatch" in r["findings"]


def test_sweep_outputs_embed_the_figure(tmp_path):
    pts = [Point("index_k=bf16", "bf16", c, f"traces/x{c}", 10, k, k / 10, "trace-checksums",
                 {"layer_offset_mismatch": 1} if k else {}, {"layer_offset_mismatch": k} if k else {}, "v", 0.1, 0.1)
           for c, k in ((1, 0), (8, 2))]
    png, page = write_sweep_outputs(str(tmp_path), pts, {"workload": "small"})
    raw = open(png, "rb").read()
    assert raw[:4] == b"\x89PNG"
    text = open(page).read()
    assert 'src="data:image/png;base64,' in text and text.count("<tr>") == 3   # header + 2 points
    assert "layer_offset_mismatch" in text and "20.0%" in text


@pytest.mark.parametrize("argv, needle", [
    (["--concurrency", "1,x"], "positive integers"),
    (["--concurrency", "0"], "positive integers"),
    (["--index-k", "fp16"], "unknown dtype"),
    (["--inject", "no-such-bug"], "unknown bug"),
    (["--workload", "no-such-preset"], "no such file or preset"),
])
def test_sweep_bad_input_one_line(tmp_path, capsys, argv, needle):
    assert main(["sweep", "-o", str(tmp_path / "s")] + argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_sweep_unwritable_output(tmp_path, capsys):
    assert main(["sweep", "-o", str(tmp_path / "no" / "such" / "dir"), "--concurrency", "1"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["sweep", "-o", "/proc/kvtrace-sweep-test", "--concurrency", "1"]) == 2   # unwritable even as root
    err = capsys.readouterr().err.strip()
    assert "cannot create" in err and len(err.splitlines()) == 1


def _sweep(tmp_path, name, workload, argv):
    out = tmp_path / name
    assert main(["sweep", "--workload", workload, "-o", str(out), "--no-progress"] + argv) == 0
    doc = json.loads((out / "sweep.json").read_text())
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert 'src="data:image/png;base64,' in (out / "sweep.html").read_text()
    for p in doc["points"]:
        assert (out / p["trace"] / "manifest.json").exists()
        assert p["source"] == "engine-verifier" and p["requests"] > 0
        # the trace's own checksums agree with the engine's verifier, request for request
        assert (p["checksum_requests"], p["checksum_corrupted"]) == (p["requests"], p["corrupted"])
    return doc["points"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_small_preset_sweep_end_to_end(tmp_path):
    pts = _sweep(tmp_path, "small", "small", ["--concurrency", "1,4", "--index-k", "fp8,bf16"])
    assert [(p["index_k"], p["concurrency"]) for p in pts] == [("fp8", 1), ("fp8", 4), ("bf16", 1), ("bf16", 4)]
    assert all(p["corrupted"] == 0 and p["findings"] == {} for p in pts)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sweep_finds_injected_uniform_slot_count_and_clean_twin_is_clean(tmp_path):
    # small-mixed: index_k on its own page size, so its slot count differs from kv's —
    # the geometry a uniform slot count misaddresses
    wl = "small-mixed"
    bug = _sweep(tmp_path, "bug", wl, ["--concurrency", "1,4", "--index-k", "bf16",
                                       "--inject", "uniform-slot-count"])
    assert all(p["corrupted"] > 0 and p["findings"].get("layer_offset_mismatch") for p in bug)
    clean = _sweep(tmp_path, "clean", wl, ["--concurrency", "4", "--index-k", "bf16"])
    assert clean[0]["corrupted"] == 0 and clean[0]["findings"] == {}
