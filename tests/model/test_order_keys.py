"""order.hb_keys (vectorized) against the straightforward per-edge algorithm it replaced:
the same keys and the same broken-edge count on random shards, clocks and edges, cycles,
same-shard edges and receives with several sends included."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtrace.model.order import hb_keys


def reference_hb_keys(shard_of, t_ns, bounds):
    """The per-edge Python loop (kvtrace 2026-12-03): segments up to the next receive
    whose send has no key yet; when no shard can move, the earliest waiting edge goes."""
    n = len(t_ns)
    keys = np.empty(n, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, shard_of[1:] != shard_of[:-1]]) if n else np.array([], dtype=np.int64)
    ends = np.r_[starts[1:], n].astype(np.int64)
    recv_of = {}
    for r, s in sorted(bounds):
        recv_of.setdefault(int(np.searchsorted(starts, r, side="right") - 1), []).append((r, s))
    pos = starts.astype(np.int64).copy()
    nxt = {k: 0 for k in recv_of}
    broken = 0

    def done_upto(row):
        return pos[np.searchsorted(starts, row, side="right") - 1] > row
    while True:
        progressed, pending = False, False
        for k in range(len(starts)):
            if pos[k] >= ends[k]:
                continue
            pending = True
            rl, j = recv_of.get(k, []), nxt.get(k, 0)
            lo_bounds, end = [], ends[k]
            while j < len(rl):
                r, s = rl[j]
                if not done_upto(s):
                    end = r
                    break
                lo_bounds.append((r, keys[s] + 1))
                j += 1
            if end <= pos[k]:
                continue
            seg = t_ns[pos[k]:end].copy()
            for r, lo in lo_bounds:
                if r < end:
                    seg[r - pos[k]] = max(seg[r - pos[k]], lo)
            if pos[k] > starts[k]:
                seg[0] = max(seg[0], keys[pos[k] - 1])
            keys[pos[k]:end] = np.maximum.accumulate(seg)
            nxt[k] = j
            pos[k] = end
            progressed = True
        if not pending:
            return keys, broken
        if not progressed:
            k = min((k for k in recv_of if nxt[k] < len(recv_of[k]) and pos[k] < ends[k]),
                    key=lambda k: t_ns[pos[k]])
            recv_of[k].pop(nxt[k])
            broken += 1


@st.composite
def traces(draw):
    sizes = draw(st.lists(st.integers(1, 30), min_size=1, max_size=4))
    shard_of = np.repeat(np.arange(len(sizes)), sizes)
    n = len(shard_of)
    t = np.array(draw(st.lists(st.integers(-50, 200), min_size=n, max_size=n)), dtype=np.int64)
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    return shard_of, t, [(r, s) for r, s in edges if r != s]


@settings(max_examples=400, deadline=None)
@given(traces())
def test_vectorized_keys_match_the_per_edge_algorithm(case):
    shard_of, t, bounds = case
    keys, broken = hb_keys(shard_of, t, bounds)
    want, want_broken = reference_hb_keys(shard_of, t, bounds)
    assert broken == want_broken
    assert keys.tolist() == want.tolist()


@settings(max_examples=200, deadline=None)
@given(traces())
def test_stable_sort_by_key_is_the_order_by_key_shard_seq(case):
    # order.build sorts rows given in (shard, seq) order by key alone
    shard_of, t, bounds = case
    keys, _ = hb_keys(shard_of, t, bounds)
    seq = np.arange(len(keys))
    assert np.argsort(keys, kind="stable").tolist() == np.lexsort((seq, shard_of, keys)).tolist()


def test_a_long_chain_of_ready_edges_keys_every_receive_after_its_send():
    # shard 0 posts 5,000 notifications; shard 1, whose clock runs far behind, receives each
    n = 5000
    shard_of = np.r_[np.zeros(n, int), np.ones(n, int)]
    t = np.r_[np.arange(n) * 10, np.arange(n) * 10 - 10**6]
    bounds = np.stack([n + np.arange(n), np.arange(n)], axis=1)
    keys, broken = hb_keys(shard_of, t, bounds)
    assert broken == 0
    assert (keys[n:] > keys[:n]).all()
    assert keys.tolist() == reference_hb_keys(shard_of, t, [tuple(b) for b in bounds.tolist()])[0].tolist()
