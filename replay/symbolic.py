"""Symbolic executor: moves provenance tags instead of bytes (fast, for exploration).

A cell's content is a canonical tuple of segments ``(start, end, atom, base)``: bytes
``[start, end)`` of the cell equal bytes ``[base, base + end - start)`` of ``atom``'s
page, where an atom is ``(request, pool, layer, page)`` (a producer's write) or ``None``
(poison: nobody wrote it). Full-slot aligned copies just share the tuple; partial or
misaligned copies split segments, so the content stays exact and its kvh64 can be
computed (cached) to cross-check the byte executor bit for bit.
"""
from __future__ import annotations

import json

import numpy as np

from ..kernels.checksum import kvh64
from ..kernels.provenance import fill_page, poison

UNKNOWN_PAGE = 0xFFFFFFFF
_CS_CACHE: dict = {}


def full(atom, size: int) -> tuple:
    """The content of a cell of ``size`` bytes holding exactly one atom's page."""
    return ((0, size, atom, 0),)


def initial_atom(cell):
    """What a cell holds before anyone writes it: poison for slots; for raw ranges (a
    program recorded without hooks) bytes naming the range, so a transfer that moves a
    changed source shows."""
    return None if cell.pool is not None else (f"{cell.agent}@{cell.addr:#x}", "mem", 0, 0)


def splice(dst: tuple, src: tuple, so: int, do: int, n: int) -> tuple:
    """``dst`` after copying ``src[so:so+n]`` to offset ``do`` (canonical result)."""
    moved = []
    for s, e, atom, base in src:
        a, b = max(s, so), min(e, so + n)
        if a < b:
            moved.append((a - so + do, b - so + do, atom, base + a - s))
    kept = []
    for s, e, atom, base in dst:
        if s < do:
            kept.append((s, min(e, do), atom, base))
        if e > do + n:
            a = max(s, do + n)
            kept.append((a, e, atom, base + a - s))
    out = []
    for seg in sorted(kept + moved):
        if out:
            ps, pe, pa, pb = out[-1]
            if pe == seg[0] and pa == seg[2] and pb + (pe - ps) == seg[3]:
                out[-1] = (ps, seg[1], pa, pb)
                continue
        out.append(seg)
    return tuple(out)


def clip(content: tuple, n: int) -> tuple:
    """The first ``n`` bytes of a content."""
    return tuple((s, min(e, n), a, b) for s, e, a, b in content if s < n)


def materialize(content: tuple, size: int) -> np.ndarray:
    """The bytes a content stands for (uint8 array of ``size``)."""
    buf = np.empty(size, np.uint8)
    for s, e, atom, base in content:
        end = base + e - s
        src = poison(end)[0] if atom is None else fill_page(atom[0], atom[1], atom[2], atom[3], end)
        buf[s:e] = src[base:end]
    return buf


def checksum(content: tuple, size: int) -> int:
    """kvh64 of a content (cached across runs: contents repeat from schedule to schedule)."""
    key = (content, size)
    cs = _CS_CACHE.get(key)
    if cs is None:
        if len(_CS_CACHE) > 500_000:
            _CS_CACHE.clear()
        cs = _CS_CACHE[key] = kvh64(materialize(content, size))
    return cs


def write_atom(graph, op: int, i: int) -> tuple:
    """The atom a program ``write`` puts into its i-th slot."""
    c = graph.col
    req = c["request"][op]
    d = c["detail"][op]
    if d and "src_request" in d:
        req = json.loads(d).get("src_request") or req
    page = graph.pages[op][i]
    return (req, c["pool"][op], c["layer"][op], UNKNOWN_PAGE if page is None else page)


class SymbolicExecutor:
    """Executes a run on contents; reads return their cells' contents."""

    name = "symbolic"

    def start(self, graph) -> None:
        self.g = graph
        self.cells = graph.mem.cells
        pre = _prepared(graph)
        self.content: dict[int, tuple] = dict(pre.initial)
        self.writes, self.fast = pre.writes, pre.fast
        self.snap: dict[int, list] = {}

    def get(self, cell: int) -> tuple:
        return self.content[cell]

    def post(self, xi: int) -> None:
        """Snapshot the sources so a move can be checked against 'the source at post'."""
        g, content = self.g, self.content
        for m in g.transfers[xi].chunks:
            self.snap[m] = [content[p[0]] for p in g.move_pieces[m - g.n_prog]]

    def write(self, op: int) -> None:
        content = self.content
        for cell, c, ext in self.writes.get(op, ()):   # a write naming no slot writes nothing
            # a partly filled last page keeps whatever its tail held
            content[cell] = c if ext is None else splice(content[cell], c, 0, 0, ext)

    def read(self, op: int) -> list:
        content = self.content
        return [None if c is None else content[c] for c in self.g.cells[op]]

    def move(self, m: int) -> bool:
        """Run a move; False when a source changed since the post."""
        g, content = self.g, self.content
        i = m - g.n_prog
        snap = self.snap.pop(m, None)
        same = True
        fast = self.fast[i]
        for j, (sc, so, dc, do, n) in enumerate(g.move_pieces[i]):
            src = content[sc]
            if snap is not None and snap[j] is not src and snap[j] != src:
                same = False
            # full-slot aligned copy: share the tuple (the common case, and the fast one)
            content[dc] = src if fast[j] else splice(content[dc], src, so, do, n)
        return same

    def checksums(self, op: int, observed: list) -> list:
        """kvh64 of what a read observed."""
        cells = self.g.cells[op]
        return [None if o is None else checksum(o, self.cells[c].size) for o, c in zip(observed, cells)]

    def matches(self, observed: tuple, expected: tuple, size: int, extent: int | None = None) -> bool:
        """Does an observed content equal the expected one (in its first ``extent`` bytes)?"""
        if extent is None:
            return observed == expected
        return clip(observed, extent) == clip(expected, extent)

    def describe(self, observed: tuple, graph=None, extent: int | None = None) -> str:
        """Whose bytes a content holds (in its first ``extent`` bytes), in words."""
        return describe(observed if extent is None else clip(observed, extent))


class _Prepared:
    """Per-graph constants of the symbolic executor (built once, reused every run)."""

    def __init__(self, g):
        cells = g.mem.cells
        self.initial = {i: full(initial_atom(c), c.size) for i, c in enumerate(cells)}
        self.writes = {}
        for op in range(g.n_prog):
            if g.col["kind"][op] == "write" and g.cells[op]:
                ext = g.extent[op] or [None] * len(g.cells[op])
                self.writes[op] = [(c, full(write_atom(g, op, i), cells[c].size), ext[i])
                                   for i, c in enumerate(g.cells[op]) if c is not None]
        self.fast = [[so == 0 and do == 0 and n == cells[sc].size == cells[dc].size
                      for sc, so, dc, do, n in pieces] for pieces in g.move_pieces]


def _prepared(g) -> _Prepared:
    pre = getattr(g, "_symbolic", None)
    if pre is None:
        pre = g._symbolic = _Prepared(g)
    return pre


_DESCRIBED: dict = {}


def describe(content: tuple) -> str:
    """Whose bytes a content holds, in words (cached: a failing schedule repeats them)."""
    w = _DESCRIBED.get(content)
    if w is None:
        if len(_DESCRIBED) > 100_000:
            _DESCRIBED.clear()
        w = _DESCRIBED[content] = _describe(content)
    return w


def _describe(content: tuple) -> str:
    parts = []
    for s, e, atom, base in content:
        if atom is None:
            w = "poison (never delivered)"
        elif atom[1] == "mem":
            w = f"the initial bytes of {atom[0]}"
        else:
            page = "?" if atom[3] == UNKNOWN_PAGE else atom[3]
            w = f"{atom[0]}'s bytes ({atom[1]} L{atom[2]} page {page})"
        if base != s:
            w += " misaligned"
        parts.append(w)
    if len(parts) == 1:
        return parts[0]
    return "mixed: " + " + ".join(dict.fromkeys(parts))
