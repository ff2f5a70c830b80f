"""The engine with prefill and decode in two OS processes: one trace, two shards whose
transfers, notifications and control messages pair up; clean in both index_k dtypes."""
from __future__ import annotations

import collections
import json

import pytest

pytest.importorskip("nixl._api")

from kvtrace.tracer import open_trace  # noqa: E402
from kvtrace.tracer.engine.cli import record  # noqa: E402
from kvtrace.tracer.engine.workload import load  # noqa: E402


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("ik", ["fp8", "bf16"])
def test_two_processes_pair_up_and_verify(tmp_path, ik, validate_trace):
    out = str(tmp_path / f"mp-{ik}.kvtrace")
    s = record(load("small", index_k=ik), [], out, processes=2)
    validate_trace(out)
    assert s["corrupted_pages"] == 0 and s["pages_read"] > 0
    t = open_trace(out)
    assert sorted(sh.name for sh in t.shards) == ["decode", "prefill"]
    assert len({sh.info["pid"] for sh in t.shards}) == 2, "one OS process per shard"
    ev = t.table("events").to_pylist()
    by = lambda shard, kind: [e for e in ev if e["shard"] == shard and e["kind"] == kind]  # noqa: E731
    # every posted WRITE's notification arrives at decode exactly once (FIFO per tag)
    posted = collections.Counter(e["msg"] for e in by("prefill", "xfer_post"))
    got = collections.Counter(e["msg"] for e in by("decode", "notif_recv"))
    assert posted and posted == got
    assert all(e["peer"] == "prefill" for e in by("decode", "notif_recv"))
    # control messages: each msg_send has its msg_recv on the other side, same id and body
    for a, b in (("decode", "prefill"), ("prefill", "decode")):
        sent = {json.loads(e["detail"])["id"]: e["msg"] for e in by(a, "msg_send")}
        recv = {json.loads(e["detail"])["id"]: e["msg"] for e in by(b, "msg_recv")}
        assert sent == recv
    assert by("decode", "msg_send") and by("prefill", "msg_send") or s["aborted"] == 0
    # same seed, same decisions as the in-process engine
    one = record(load("small", index_k=ik), [], str(tmp_path / "one.kvtrace"))
    assert {k: one[k] for k in ("steps", "pages_read", "done", "aborted")} == \
        {k: s[k] for k in ("steps", "pages_read", "done", "aborted")}
