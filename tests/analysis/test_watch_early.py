"""kvtrace watch's early findings (live_session.LiveSession with ``early``): the findings a
re-check hands out before it ends are exactly those its result holds, folded and
regrouped the same way (every scenario of analysis_cases.py, bug and clean twin); a
check's dependencies come from the SQL it runs; a refresh that changed nothing keeps
every object and finding."""
from __future__ import annotations

import pytest

from kvtrace.analysis.findings import FOLDS, catalog, fold_sources
from kvtrace.analysis.live_session import LiveSession, _check_needs
from kvtrace.analysis.watch import identity
from kvtrace.model.registry import BASE, on_demand, reads, registry

from analysis_cases import CASES, XFAIL  # noqa: E402


def _run(path):
    batches = []
    with LiveSession(str(path), workers=4) as s:
        final = s.findings(on_final=batches.append)
    return batches, final


BUGS = [n for n in CASES if not n.startswith("legal_")]
RUNS = [(n, True) for n in BUGS] + [(n, False) for n in CASES if (n, False) not in XFAIL]


@pytest.mark.slow
@pytest.mark.parametrize("name,bug", RUNS, ids=[f"{n}-{'bug' if b else 'clean'}" for n, b in RUNS])
def test_early_findings_are_the_result(tmp_path, name, bug):
    """Handed out early == the re-check's result == what the scenario expects (the clean
    twins and legal patterns: nothing, early or late)."""
    if (name, bug) in XFAIL:
        pytest.skip(XFAIL[(name, bug)])
    path = tmp_path / f"{name}-{int(bug)}.kvtrace"
    expected = CASES[name](str(path), bug=bug)
    batches, final = _run(path)
    early = [identity(f) for b in batches for f in b]
    assert sorted(early, key=repr) == sorted((identity(f) for f in final), key=repr)
    # key=repr: a finding on bytes no layout describes has no pool (None)
    assert sorted(((f.check, f.agent, f.request, f.pool, sorted(f.slots)) for f in final), key=repr) == \
        sorted(((c, a, r, p, sorted(s)) for c, a, r, p, s in expected), key=repr)
    if not bug:
        assert batches == []


def test_a_check_needs_what_its_sql_names():
    objs = registry()
    lazy = on_demand(objs)
    assert reads("-- reads holdings\nSELECT * FROM end_hold e JOIN events USING (shard)", objs) == {"end_hold", "events"}
    for n, c in catalog().items():
        named = reads(c.sql, objs)
        assert named & set(objs) <= _check_needs()[n]     # and what those require
        assert not _check_needs()[n] & lazy              # no check waits for an on-demand object
        assert named <= set(objs) | BASE | {"recorded_descs"}


def test_fold_sources_are_transitive():
    # layout_mismatch folds layer_offset_mismatch, which folds desc_not_owned
    assert {"layout_mismatch", "layer_offset_mismatch"} <= fold_sources("desc_not_owned")
    for root in FOLDS:
        for cons, _ in FOLDS[root]:
            assert root in fold_sources(cons) and fold_sources(root) <= fold_sources(cons)
    assert fold_sources("double_free") == frozenset()
