"""Happens-before over an operation graph, as vector clocks.

An operation happens before another when a chain of program order (per recording
thread) and graph waits (post -> move -> completion observation, message send ->
receive) leads from one to the other; recorded times never count. One vector clock per
operation (one entry per recording thread) answers "did a happen before b?" in O(1).
"""
from __future__ import annotations

import collections


def happens_before(graph) -> "HappensBefore":
    """The happens-before of ``graph`` (computed once, cached on the graph)."""
    hb = getattr(graph, "_hb", None)
    if hb is None:
        hb = graph._hb = HappensBefore(graph)
    return hb


class HappensBefore:
    """Vector clocks of every operation of ``graph`` (program ops and moves)."""

    def __init__(self, graph):
        g = graph
        n_prog, n_ops, nt = g.n_prog, g.n_ops, len(g.threads)
        self.graph = g
        self.pos = [0] * n_prog
        prev = [-1] * n_prog
        for th in g.threads:
            for i, op in enumerate(th):
                self.pos[op] = i + 1
                if i:
                    prev[op] = th[i - 1]
        deps = [list(w) for w in g.waits]
        for op in range(n_prog):
            if prev[op] >= 0:
                deps[op].append(prev[op])
        need = [len(d) for d in deps]
        users = [[] for _ in range(n_ops)]
        for op, ds in enumerate(deps):
            for d in ds:
                users[d].append(op)
        zero = (0,) * nt
        vc: list = [None] * n_ops
        ready = collections.deque(op for op in range(n_ops) if need[op] == 0)
        left = n_ops
        while left:
            if not ready:   # a wait that can never be met (a truncated trace): break it
                op = next(o for o in range(n_ops) if vc[o] is None and need[o] > 0)
                need[op] = 0
                ready.append(op)
            op = ready.popleft()
            if vc[op] is not None:
                continue
            clocks = [vc[d] for d in deps[op] if vc[d] is not None]
            v = list(zero) if not clocks else [max(x) for x in zip(*clocks)] if len(clocks) > 1 else list(clocks[0])
            if op < n_prog:
                t = g.thread_of[op]
                v[t] = max(v[t], self.pos[op])
            vc[op] = tuple(v)
            left -= 1
            for u in users[op]:
                need[u] -= 1
                if need[u] == 0:
                    ready.append(u)
        self.vc = vc

    def before(self, a: int, b: int) -> bool:
        """Did program op ``a`` happen before op ``b`` (program op or move)?"""
        if a == b:
            return False
        return self.vc[b][self.graph.thread_of[a]] >= self.pos[a]

    def any_before(self, ops, b: int) -> bool:
        """Did any of the program ops ``ops`` happen before ``b``?"""
        return any(self.before(a, b) for a in ops)
