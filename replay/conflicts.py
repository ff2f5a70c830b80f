"""Slot conflicts between moves and the operations inside their windows.

Two operations conflict when they touch a common cell and at least one of them writes
it (a move reads its source cells and writes its destination cells; a program
``write`` writes, a ``read`` reads). A move's window runs from its post to its first
recorded completion observation (to the end of the trace when never observed); an
operation is inside it when its recorded time is, a move when the windows overlap.
Recorded times only pick candidates here — correctness never rests on them. A program
operation recorded after the window still counts while it does not happen after a
completion observation of the transfer (happens-before, ``hb.py``): the recording was
merely fast there (a free on a message that does not follow the data, then a reuse).
"""
from __future__ import annotations

import bisect
import collections
import dataclasses


@dataclasses.dataclass
class ConflictIndex:
    """``pairs``: (move, op) candidates for reordering, in a fixed order; ``by_op``: op →
    the moves it conflicts with (both directions of every pair)."""
    pairs: list[tuple[int, int]]
    by_op: dict[int, list[int]]


def move_cells(graph, m: int) -> list[tuple[int, bool]]:
    """(cell, writes) touched by move op ``m``."""
    out = {}
    for sc, _so, dc, _do, _n in graph.move_pieces[m - graph.n_prog]:
        out.setdefault(sc, False)
        out[dc] = True
    return list(out.items())


def _bound_observers(g) -> list[list[int]]:
    """Per transfer, the completion observations that wait for its bytes. Under a fault
    (``notify-before-data``) a notification observes nothing: the bytes may land after
    it, so it does not close the transfer's window."""
    out = []
    for t in g.transfers:
        chunks = set(t.chunks)
        out.append([o for o in t.observers if chunks.issubset(g.waits[o])] if chunks else list(t.observers))
    return out


def conflict_index(graph) -> ConflictIndex:
    """Conflicts of ``graph`` (computed once, cached on the graph)."""
    cached = getattr(graph, "_conflicts", None)
    if cached is not None:
        return cached
    g = graph
    tns = g.col["t_ns"]
    inf = float("inf")
    touch = collections.defaultdict(list)  # cell -> [(time, op, writes)]
    for op in range(g.n_prog):
        cs = g.cells[op]
        if cs:
            w = g.col["kind"][op] == "write"
            for c in set(cs):
                if c is not None:
                    touch[c].append((tns[op] or 0, op, w))
    window = {}
    bound = _bound_observers(g)
    for m in range(g.n_prog, g.n_ops):
        t = g.transfers[g.move_xfer[m - g.n_prog]]
        obs_t = [tns[o] for o in bound[g.move_xfer[m - g.n_prog]] if tns[o] is not None]
        window[m] = (t.t_post, min(obs_t) if obs_t else inf)
        for c, w in move_cells(g, m):
            touch[c].append((t.t_post, m, w))
    for lst in touch.values():
        lst.sort()
    hb = None
    pairs, by_op = set(), collections.defaultdict(set)
    for m in range(g.n_prog, g.n_ops):
        lo, hi = window[m]
        for c, mw in move_cells(g, m):
            lst = touch[c]
            # ops of another move may start before m's post and still overlap its window
            start = 0 if any(o >= g.n_prog for _t, o, _w in lst) else bisect.bisect_left(lst, (lo, -1, False))
            for t, o, w in lst[start:]:
                if t > hi:
                    if o >= g.n_prog:
                        continue        # another transfer posted after m completed
                    if hb is None:
                        from .hb import happens_before
                        hb = happens_before(g)
                    obs = bound[g.move_xfer[m - g.n_prog]]
                    if not obs or hb.any_before(obs, o):
                        break           # later touches of the cell follow this one
                if o == m or not (mw or w):
                    continue
                if o >= g.n_prog:
                    olo, ohi = window[o]
                    if not (olo <= hi and lo <= ohi) or olo < lo or (olo == lo and o < m):
                        continue  # only moves posted after m are flipped past it
                elif t < lo:
                    continue
                pairs.add((m, o))
                by_op[o].add(m)
                by_op[m].add(o) if o >= g.n_prog else None
    idx = ConflictIndex(sorted(pairs), {k: sorted(v) for k, v in by_op.items()})
    g._conflicts = idx
    return idx
