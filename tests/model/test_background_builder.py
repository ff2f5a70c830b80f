"""Background builders (Derived.background: inflight_pairs' sweep) run beside the SQL
objects built after them; their tables are the same as built in turn, and a failure in
one is raised by derive() with the model still closable."""
from __future__ import annotations

import shutil

import pytest

from kvtrace.model import TraceModel, inflight

TRACE = "traces/engine-early-src-free.kvtrace"


def rows(m: TraceModel, name: str) -> list:
    return sorted(map(repr, m.execute(f'SELECT * FROM "{name}"').fetchall()))


def test_background_and_in_turn_give_the_same_tables(tmp_path, monkeypatch):
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        assert not m._pending
        background = {n: rows(m, n) for n in ("inflight_pairs", "desc_match", "read_predict")}
    assert background["inflight_pairs"]            # this trace has overlapping in-flight ends
    monkeypatch.setenv("KVTRACE_DATABASE", "file")   # out of core: built in turn
    with TraceModel(path, keep_derived=False) as m:
        m.derive()
        assert {n: rows(m, n) for n in background} == background


def test_a_failing_background_builder_raises_from_derive(tmp_path, monkeypatch):
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)

    def broken(*a, **k):
        raise RuntimeError("sweep failed")
    monkeypatch.setattr(inflight, "build", broken)
    m = TraceModel(path, keep_derived=False)
    with pytest.raises(RuntimeError, match="sweep failed"):
        m.derive()
    assert not m._pending and "inflight_pairs" not in m._built
    assert "desc_match" in m._built               # built beside it, before the failure surfaced
    m.close()


def test_out_of_core_a_builder_runs_with_duckdb_under_the_rest_of_the_cap(tmp_path, monkeypatch):
    """Out of core the sweep runs alone and DuckDB's limit drops by the builder's share
    while it runs (its cached pages would otherwise fill the cap beside the sweep's
    arrays), then returns to the cap; the table is the one built in memory."""
    path = str(tmp_path / "t.kvtrace")
    shutil.copytree(TRACE, path)
    with TraceModel(path, keep_derived=False) as m:
        m.derive(["inflight_pairs"])
        in_memory = rows(m, "inflight_pairs")
    seen, model = [], {}
    build = inflight.build

    def watched(ask, *a, **k):   # out of core the builder runs on the model's own thread
        seen.append(model["m"].cursor().execute("SELECT current_setting('memory_limit')").fetchone()[0])
        return build(ask, *a, **k)
    monkeypatch.setattr(inflight, "build", watched)
    monkeypatch.setenv("KVTRACE_DATABASE", "file")
    with TraceModel(path, keep_derived=False, memory_limit="1GB") as m:
        assert m.database != ":memory:"
        model["m"] = m
        m.derive(["inflight_pairs"])
        after = m.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        assert rows(m, "inflight_pairs") == in_memory
    assert seen == ["476.8 MiB"]      # 500 MB: the cap less memory.BUILDER_SHARE
    assert after == "715.2 MiB"       # out of core DuckDB's share of the 1 GB cap again (memory.OUT_OF_CORE_DUCKDB_SHARE)


def test_the_order_builds_a_background_builder_early_and_its_users_last():
    """_background_early: what a background builder requires (transitively) comes first, the
    builder right after the last of it, the objects that require it after every other one,
    and every object still after what it requires (on the real registry, and on a small one
    where name order would put a user of the builder before an unrelated object)."""
    from kvtrace.model.derived import Derived
    from kvtrace.model.registry import build_order, registry
    from kvtrace.model.trace import _background_early

    def check(objs, targets=None):
        order = build_order(objs, targets)
        out = _background_early(objs, order)
        assert sorted(out) == sorted(order)
        at = {n: i for i, n in enumerate(out)}
        for n in out:
            assert all(at[r] < at[n] for r in objs[n].requires if r in at), n
        return out

    out = check(registry())
    users = [n for n in out if "inflight_pairs" in registry()[n].requires]
    assert users and out[-len(users):] == users        # (none of them is required by another object)
    assert out.index("inflight_pairs") < out.index("read_predict_ids") < out.index("inflight_writes")

    objs = {"a": Derived("a", ()), "b": Derived("b", ("a",)), "bg": Derived("bg", ("b",), build=print, background=True),
            "c_user": Derived("c_user", ("bg",)), "d": Derived("d", ("a",)), "e": Derived("e", ())}
    assert check(objs) == ["a", "b", "bg", "d", "e", "c_user"]
    assert check(objs, ["d", "e"]) == ["a", "d", "e"]     # no background builder asked for: the order as is
