"""Findings come out in one order whatever order the checks' rows arrive in: two findings of
one check can tie on check, count, request and first event (the source and destination ends
of one transfer, both not held), and DuckDB's threads hand such rows over in either order.
The order decides what the report lists first and which root a consequence folds into."""
from __future__ import annotations

import itertools

from kvtrace.analysis.findings import Finding, fold
from kvtrace.analysis.session import _order


def _f(check, agent, slots, *, count=9, request="1022", pool="index_k"):
    return Finding(check=check, severity="error", agent=agent, request=request, pool=pool, layer=0,
                   slot=slots[0], events=[("prefill", 66)], count=count, message=f"{check} {agent}",
                   slots=list(slots))


TIED = [_f("desc_not_owned", "prefill", [48, 49]), _f("desc_not_owned", "decode", [73, 74]),
        _f("layer_offset_mismatch", "decode", [73, 74], count=3)]


def test_every_arrival_order_gives_one_order_and_one_folding():
    seen = set()
    for perm in itertools.permutations(TIED):
        out = fold(sorted(perm, key=_order))
        seen.add(repr([(f.check, f.agent, f.extra.get("folded")) for f in sorted(out, key=_order)]))
    assert len(seen) == 1, seen
    # the premise: folded as they arrive, the folded list follows the arrival order
    raw = {repr([g["message"] for f in fold(list(perm)) for g in f.extra.get("folded", [])])
           for perm in itertools.permutations(TIED)}
    assert len(raw) > 1


def test_the_tie_is_broken_by_agent_not_by_arrival():
    a, b = TIED[0], TIED[1]
    assert sorted([a, b], key=_order) == sorted([b, a], key=_order) == [b, a]   # "decode" < "prefill"
