"""The Parquet index: reused while the shards' files are unchanged (decided from sizes and
mtimes alone), and when one shard changes only that shard is re-indexed."""
from __future__ import annotations

import os
import shutil

from kvtrace.model.index import INDEX_DIR, ensure_index

from analysis_cases import CASES


def _mtimes(d: str) -> dict:
    return {os.path.relpath(os.path.join(r, f), d): os.stat(os.path.join(r, f)).st_mtime_ns
            for r, _, fs in os.walk(d) for f in fs if f.endswith(".parquet")}


def test_reused_then_only_the_changed_shard_reindexed(tmp_path):
    from kvtrace.analysis.session import TraceSession

    p = str(tmp_path / "t.kvtrace")
    CASES["abort_free_inflight"](p, bug=True)
    with TraceSession(p) as s:
        want = [(f.check, f.request, f.slots) for f in s.findings()]
        shards = list(s.shards)
    assert want and len(shards) >= 2
    d = os.path.join(p, INDEX_DIR)
    first = _mtimes(d)
    assert set(first) >= {f"events/{n}.parquet" for n in shards}
    ensure_index(p)
    assert _mtimes(d) == first                        # unchanged trace: nothing rewritten
    # one shard's stream file changes (same bytes, new mtime): only that shard is redone
    ev = os.path.join(p, shards[0], "events.arrows")
    st = os.stat(ev)
    os.utime(ev, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    ensure_index(p)
    now = _mtimes(d)
    changed = {k for k in now if now[k] != first[k]}
    assert changed and all(k.endswith(f"/{shards[0]}.parquet") for k in changed)
    with TraceSession(p) as s:
        assert [(f.check, f.request, f.slots) for f in s.findings()] == want
    # a shard that disappears takes its index files with it
    shutil.rmtree(os.path.join(p, shards[-1]))
    ensure_index(p)
    assert not any(k.endswith(f"/{shards[-1]}.parquet") for k in _mtimes(d))
