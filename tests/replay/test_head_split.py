"""Pages assembled from head slices (heterogeneous attention TP, as SGLang's
send_kvcache_slice sends them): legal assemblies verify clean, a misplaced or wrong
slice is corrupted — as data: scenario -> what replay must find under every schedule."""
import pytest

from kvtrace.replay.api import make_executor, make_scheduler, run_graph
from kvtrace.replay.graph import load

# scenario (conftest.py) -> (corrupted slot-reads, the first one's read and slot, whose
# bytes it held): 0 = clean. Every run compares with recorded read checksums (the
# scenarios record what the assembled pages held) and must differ nowhere.
EXPECT = {
    "head_split_p1d2": (0, None, None),
    "head_split_p2d1": (0, None, None),
    # the last rank pair's slice of token 1 lands at the other head offset: a gap of poison
    "head_split_p1d2_misplaced": (1, ("decode1", 3), "poison (never delivered)"),
    "head_split_p2d1_misplaced": (1, ("decode0", 3), "poison (never delivered)"),
    # fully covered, but token 1 (or every token of one page) carries the wrong heads
    "head_split_p1d2_wrong_heads": (1, ("decode1", 3), "r1's bytes (kv L0 page 0) misaligned"),
    "head_split_p1d2_wrong_page": (1, ("decode1", 3), "r1's bytes (kv L0 page 0) misaligned"),
}


@pytest.mark.parametrize("name", sorted(EXPECT))
@pytest.mark.parametrize("sched", ["recorded", "eager", "lazy", "random", "conflicts"])
def test_head_split_pages_verify_by_their_slices(scenario, name, sched):
    g = load(scenario(name))
    n, where, found = EXPECT[name]
    for ex in ("symbolic", "bytes"):
        v = run_graph(g, make_scheduler(sched, 1), make_executor(ex)).verdict
        assert len(v.corrupted) == n and v.failed == bool(n), (ex, v.lines(g))
        assert v.reads_verified == v.recorded_compared > 0 and v.recorded_differs == 0, (ex, v.lines(g))
        if n:
            b = v.corrupted[0]
            assert (g.col["agent"][b.op], b.slot) == where, (ex, v.lines(g))
            if ex == "symbolic":   # the byte executor names the majority of a mixed page
                assert found in b.found, b.found
