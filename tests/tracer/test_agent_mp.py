"""TracedAgent in two OS processes (spawn) exchanging NIXL metadata over loopback listeners."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("nixl._api")

from kvtrace.tracer import open_trace  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(__file__), "programs", "traced_pd.py")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_processes_each_with_own_shard(tmp_path, validate_trace):
    out = tmp_path / "pd.kvtrace"
    env = dict(os.environ, NIXL_LOG_LEVEL="WARN")
    env.pop("KVTRACE_TRACE_DIR", None)
    r = subprocess.run([sys.executable, PROGRAM, str(out)], capture_output=True, text=True, env=env, timeout=100)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "bytes ok True child exit 0" in r.stdout
    validate_trace(out)
    t = open_trace(str(out))
    assert sorted(s.name for s in t.shards) == ["decode", "prefill"]
    ev = t.table("events").to_pylist()
    mine = lambda shard, kind: [e for e in ev if e["shard"] == shard and e["kind"] == kind]  # noqa: E731
    # WRITE: prefill initiates (post, descs, done); decode only sees the notification
    (wpost,) = mine("prefill", "xfer_post")
    (wdone,) = mine("prefill", "xfer_done")
    assert wpost["peer"] == "decode" and wpost["request"] == "7" and wdone["xfer"] == wpost["xfer"]
    assert json.loads(wdone["detail"])["telemetry"]["bytes"] == wpost["nbytes"] == 3 * 512
    assert [e["msg"] for e in mine("decode", "notif_recv")] == [b"7_kv_0_1_0"]
    # READ: decode initiates; the bytes move prefill -> decode; prefill gets the notification
    (rpost,) = mine("decode", "xfer_post")
    assert rpost["request"] == "8" and mine("decode", "xfer_done")[0]["xfer"] == rpost["xfer"]
    descs = t.table("descs").to_pylist()
    read = [d for d in descs if d["shard"] == "decode"]
    assert [(d["op"], d["src_agent"], d["dst_agent"], d["nbytes"]) for d in read] == [("READ", "prefill", "decode", 512)]
    write = [d for d in descs if d["shard"] == "prefill"]
    dl = {(d["dlist"], d["idx"]): d["addr"] for d in t.table("dlists").to_pylist() if d["shard"] == "prefill"}
    assert [(d["src_addr"], d["dst_addr"]) for d in write] == \
        [(dl[(d["src_dlist"], d["src_idx"])], dl[(d["dst_dlist"], d["dst_idx"])]) for d in write]
    assert sorted(e["msg"] for e in mine("prefill", "notif_recv")) == [b"7_aux", b"8:2"]
    assert [e["msg"] for e in mine("decode", "notif_send")] == [b"7_aux"]
