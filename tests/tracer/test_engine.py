"""The reference PD engine in one process: clean runs verify every page they read, in
both index_k dtypes; the trace conforms and says what the engine did."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("nixl._api")

from kvtrace.kernels.checksum import kvh64  # noqa: E402
from kvtrace.tracer import open_trace  # noqa: E402
from kvtrace.tracer.engine.cli import record  # noqa: E402
from kvtrace.tracer.engine.workload import load  # noqa: E402


@pytest.fixture(scope="module", params=["fp8", "bf16"])
def clean(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("eng") / f"clean-{request.param}.kvtrace")
    summary = record(load("small", index_k=request.param), [], out)
    return out, summary, request.param


@pytest.mark.timeout(120)
def test_clean_run_verifies_every_page(clean, validate_trace):
    out, s, ik = clean
    validate_trace(out)
    assert s["corrupted_pages"] == 0 and s["corrupted_requests"] == 0
    assert s["requests_read"] > 0 and s["pages_read"] > 0
    ev = open_trace(out).table("events")
    reads = [e for e in ev.to_pylist() if e["kind"] == "read"]
    # every page the verifier checked is a recorded read with a checksum
    assert sum(len(e["slots"]) for e in reads) == s["pages_read"]
    assert all(len(e["checksums"]) == len(e["slots"]) for e in reads)
    lay = open_trace(out).table("layouts").to_pylist()
    dtypes = {r["dtype"] for r in lay if r["pool"] == "index_k"}
    assert dtypes == {"fp8_e4m3+scales" if ik == "fp8" else "bf16"}


@pytest.mark.timeout(120)
def test_trace_models_sglang_nixl_path(clean):
    out, s, _ = clean
    t = open_trace(out)
    ev = t.table("events").to_pylist()
    kinds = lambda shard, kind: [e for e in ev if e["shard"] == shard and e["kind"] == kind]  # noqa: E731
    # prefill initiates WRITEs, polls them to DONE and releases; decode gets the notifications
    posts = kinds("prefill", "xfer_post")
    assert posts and len(kinds("prefill", "xfer_done")) == len(posts) == len(kinds("decode", "notif_recv"))
    assert len(kinds("prefill", "xfer_release")) == len(posts)
    # decode frees on finish, abort and timeout (the small preset has each)
    reasons = {json.loads(e["detail"]).get("reason") for e in kinds("decode", "free") if e["detail"]}
    assert {"finish", "abort", "timeout"} <= reasons, reasons
    # every slot allocated is given back by the end (counted references)
    held = {}
    for e in ev:
        if e["kind"] in ("alloc", "free"):
            for sl in e["slots"]:
                key = (e["shard"], e["pool"], sl)
                held[key] = held.get(key, 0) + (1 if e["kind"] == "alloc" else -1)
    assert all(v == 0 for v in held.values())
    tags = {e["msg"].decode() for e in posts}
    assert any(m.endswith("_aux") for m in tags) and any("_state_0_0" in m for m in tags)
    assert any("_kv_1_" in m for m in tags), "multi-chunk transfers"
    # decode tells prefill where its memory is, then each request's pages
    types = [json.loads(e["detail"])["type"] for e in kinds("decode", "msg_send")]
    assert types[0] == "register" and "pages" in types
    # prefix cache: shared references, and partly filled last pages
    assert any(e["detail"] and json.loads(e["detail"]).get("shared") for e in kinds("decode", "alloc"))
    wl = load("small")
    assert any(json.loads(e["detail"])["tokens"] % wl.geometry["kv_page_tokens"]
               for e in kinds("decode", "req_start"))
    # descriptor indices address the prepped lists region-major: entry idx is what was moved
    ds = [d for d in t.table("descs").to_pylist()]
    dl = {(d["shard"], d["dlist"], d["idx"]): d["addr"] for d in t.table("dlists").to_pylist()}
    assert all(dl[("prefill", d["src_dlist"], d["src_idx"])] == d["src_addr"] and
               dl[("prefill", d["dst_dlist"], d["dst_idx"])] == d["dst_addr"] for d in ds)


@pytest.mark.timeout(120)
def test_read_checksums_are_the_bytes_the_producer_wrote(clean):
    out, _, _ = clean
    ev = open_trace(out).table("events").to_pylist()
    # every checksum a consumer saw was written by some producer write (bytes moved intact)
    written = {c for e in ev if e["kind"] == "write" for c in e["checksums"]}
    seen = [c for e in ev if e["kind"] == "read" for c in e["checksums"]]
    assert seen and set(seen) <= written


@pytest.mark.timeout(120)
def test_same_seed_same_allocation_decisions(tmp_path):
    wl = load("small", seed=11)
    outs = [str(tmp_path / f"r{i}.kvtrace") for i in range(2)]
    for o in outs:
        record(wl, [], o)

    def allocs(o):
        return [(e["shard"], e["request"], e["pool"], tuple(e["slots"])) for e in
                open_trace(o).table("events").to_pylist() if e["kind"] in ("alloc", "free")]
    assert allocs(outs[0]) == allocs(outs[1])


def test_kvh64_matches_provenance_reference():
    from kvtrace.tracer.engine.verify import content
    rows = content("1000", "kv", 1, [0, 1], 1152)
    assert rows.shape == (2, 1152) and kvh64(rows[0]) != kvh64(rows[1])
    assert np.array_equal(rows, content("1000", "kv", 1, [0, 1], 1152))


@pytest.mark.gpu
@pytest.mark.timeout(300)
def test_clean_run_on_cuda_vram(tmp_path, validate_trace):
    """The same engine with kv/index_k/state in VRAM (torch tensors registered with NIXL)."""
    out = str(tmp_path / "cuda.kvtrace")
    s = record(load("small"), [], out, device="cuda")
    validate_trace(out)
    assert s["corrupted_pages"] == 0 and s["pages_read"] > 0
    lay = open_trace(out).table("layouts").to_pylist()
    assert {r["mem_type"] for r in lay if r["pool"] == "kv"} == {"VRAM"}


@pytest.mark.timeout(180)
def test_tensor_path_gives_the_same_bytes(clean, tmp_path):
    """device="torch-cpu" runs the code the GPU uses (torch tensors registered with NIXL,
    kernels.api fill and checksum) on host memory: same decisions, same checksums."""
    pytest.importorskip("torch")
    out, s, ik = clean
    other = str(tmp_path / "tensor.kvtrace")
    t = record(load("small", index_k=ik), [], other, device="torch-cpu")
    assert t["corrupted_pages"] == 0 and t["pages_read"] == s["pages_read"]

    def sums(o):
        return [(e["kind"], e["pool"], e["layer"], tuple(e["checksums"])) for e in
                open_trace(o).table("events").to_pylist() if e["kind"] in ("write", "read")]
    assert sums(out) == sums(other)


@pytest.mark.timeout(120)
def test_no_checksums_records_the_same_events_and_says_bytes_went_unchecked(clean, tmp_path, validate_trace):
    """``--no-checksums``: same events as a checksummed run, null checksums, a valid trace,
    and ``kvtrace check`` skips the byte comparison and says so instead of claiming it."""
    out, s, ik = clean
    cheap = str(tmp_path / "nocsum.kvtrace")
    t = record(load("small", index_k=ik), [], cheap, checksums=False)
    validate_trace(cheap)
    assert t["pages_read"] == s["pages_read"] and t["corrupted_pages"] == 0

    def events(o, with_sums):
        return [(e["kind"], e["pool"], e["layer"], tuple(e["slots"] or ()), with_sums and e["checksums"])
                for e in open_trace(o).table("events").to_pylist()]
    assert events(cheap, False) == events(out, False)
    assert all(e[4] is None for e in events(cheap, True) if e[0] in ("write", "read"))
    from kvtrace.analysis.session import TraceSession
    sess = TraceSession(cheap)
    verdict = sess.verdict(None, ["pd-corruption"])          # runs the checks
    assert "checksum_mismatch" in dict(sess.checks_skipped)
    line = [h.reason for h in verdict.hypotheses if h.name == "completion before data"][0]
    assert "not checked: checksum_mismatch (read/write events carry no checksums)" in line
    assert "(read_before_done, read_undelivered)" in line
