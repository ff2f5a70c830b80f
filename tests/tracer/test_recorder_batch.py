"""The batched event paths (Recorder.layers / allocs / frees: one call per engine step or
request) record exactly the rows the per-call methods record (event per layer, alloc,
free), times aside: same seqs, kinds, requests, slots, pages, checksums and details, on
random mixes of pools, layers, shared allocs, free reasons and checksums, in one trace
interleaved with ordinary events. And the reference engine, which records through them,
still has its planted bug found while its clean twin checks clean."""
from __future__ import annotations

import numpy as np
import pytest
import pyarrow.ipc as ipc

from kvtrace.tracer.recorder import Recorder
from kvtrace.tracer.schema import EventKind as K


def _events(path: str) -> list[dict]:
    with ipc.open_stream(path + "/s/events.arrows") as r:
        rows = r.read_all().to_pylist()
    for row in rows:
        del row["t_ns"]
    return rows


def _script(rng, n: int) -> list[tuple]:
    """A random sequence of engine actions, each recorded once per-call and once batched."""
    out = []
    for _ in range(n):
        what = rng.choice(["write", "read", "alloc", "free", "other"])
        req = None if rng.random() < 0.2 else f"r{int(rng.integers(0, 5))}"
        if what in ("write", "read"):
            layers = int(rng.integers(0, 4))
            slots = [int(s) for s in rng.integers(0, 100, int(rng.integers(0, 6)))]
            pages = None if rng.random() < 0.3 else list(range(len(slots)))
            sums = None if rng.random() < 0.4 else [[int(x) for x in rng.integers(0, 1 << 62, len(slots))]
                                                    for _ in range(layers)]
            out.append((what, req, str(rng.choice(["kv", "index_k"])), layers, slots, pages, sums))
        elif what == "alloc":
            items = []
            for _ in range(int(rng.integers(0, 4))):
                slots = [int(s) for s in rng.integers(0, 100, int(rng.integers(0, 6)))]
                pages = None if rng.random() < 0.5 else [int(p) for p in rng.integers(0, 9, len(slots))]
                items.append((str(rng.choice(["kv", "state", "aux"])), slots, pages, bool(rng.random() < 0.3)))
            out.append((what, req, items))
        elif what == "free":
            items = [(str(rng.choice(["kv", "state"])), [int(s) for s in rng.integers(0, 100, int(rng.integers(0, 5)))])
                     for _ in range(int(rng.integers(0, 4)))]
            out.append((what, req, items, rng.choice([None, "", "finish", "abort", "evict"])))
        else:
            out.append((what, req))
    return out


def _per_call(rec: Recorder, script) -> None:
    for step in script:
        what, req = step[0], step[1]
        if what in ("write", "read"):
            _, _, pool, layers, slots, pages, sums = step
            for layer in range(layers):
                rec.event(K.WRITE if what == "write" else K.READ, "a", req, pool=pool, layer=layer,
                          slots=list(slots), pages=None if pages is None else list(pages),
                          checksums=None if sums is None else sums[layer])
        elif what == "alloc":
            for pool, slots, pages, shared in step[2]:
                rec.alloc("a", req, pool, slots, pages, shared=shared)
        elif what == "free":
            for pool, slots in step[2]:
                rec.free("a", req, pool, slots, reason=step[3])
        else:
            rec.event(K.MSG_SEND, "a", req, peer="b", msg=b"x", detail={"k": 1})


def _batched(rec: Recorder, script) -> None:
    for step in script:
        what, req = step[0], step[1]
        if what in ("write", "read"):
            _, _, pool, layers, slots, pages, sums = step
            rec.layers(K.WRITE if what == "write" else "read", "a", req, pool, layers, slots, pages, sums)
        elif what == "alloc":
            rec.allocs("a", req, step[2])
        elif what == "free":
            rec.frees("a", req, step[2], reason=step[3])
        else:
            rec.event(K.MSG_SEND, "a", req, peer="b", msg=b"x", detail={"k": 1})


def test_batched_rows_equal_per_call_rows(tmp_path):
    rng = np.random.default_rng(7)
    for trial in range(25):
        script = _script(rng, int(rng.integers(1, 40)))
        paths = []
        for name, play in (("per_call", _per_call), ("batched", _batched)):
            path = str(tmp_path / f"{trial}-{name}")
            rec = Recorder(path, "s", flush_interval=3600)
            with rec.request("ctx"):       # a request given as None is the context's
                play(rec, script)
            rec.close()
            paths.append(path)
        a, b = _events(paths[0]), _events(paths[1])
        assert a == b, trial
        assert len(a) == sum(s[3] if s[0] in ("write", "read") else len(s[2]) if s[0] in ("alloc", "free") else 1
                             for s in script)


def test_allocs_shared_flag_for_all_items(tmp_path):
    rows = []
    for name in ("per_call", "batched"):
        path = str(tmp_path / name)
        rec = Recorder(path, "s", flush_interval=3600)
        if name == "per_call":
            rec.alloc("a", "r", "kv", [1, 2], shared=True)
            rec.alloc("a", "r", "kv", [3], [7], shared=True)
        else:
            assert rec.allocs("a", "r", [], shared=True) == -1
            assert rec.allocs("a", "r", [("kv", [1, 2], None), ("kv", (3,), (7,))], shared=True) == 0
        rec.close()
        rows.append(_events(path))
    assert rows[0] == rows[1]
    assert [r["detail"] for r in rows[1]] == ['{"shared":true}'] * 2


def test_engine_records_through_batches_bug_found_clean_twin_clean(tmp_path):
    """The engine records its writes, reads, allocs and frees through the batched paths:
    an injected early source free is still found, and the same session without it is clean."""
    pytest.importorskip("nixl._api")
    from kvtrace.analysis.watch import run_checks
    from kvtrace.tracer.engine.runner import run_inprocess
    from kvtrace.tracer.engine.workload import load

    wl = load("small", requests=60)
    found = {}
    for bugs in ((), ("early-src-free",)):
        path = str(tmp_path / ("bug" if bugs else "clean"))
        run_inprocess(wl, list(bugs), path, checksums=True)
        found[bugs] = {f.check for f in run_checks(path)}
    assert found[()] == set()
    assert found[("early-src-free",)], "the planted early source free went unnoticed"
