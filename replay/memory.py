"""Memory map for replay: which *cells* (slots or byte ranges) a trace's operations touch.

A cell is the unit replay re-creates and tracks: one slot of one (agent, pool, layer)
region when ``layouts`` describe the memory, otherwise one range of a registered region
or prepared list, cut at every descriptor boundary. Descriptors resolve to *pieces*
``(cell, offset, nbytes)``; a descriptor any byte of which falls outside every known
region resolves to ``None`` and is reported, never executed. The ranges come from the
trace model (graph.py: ``mem_ranges``; descriptor ends in layout slots are the model's
``slot_pieces``); this module only cuts them into cells.
"""
from __future__ import annotations

import bisect
import dataclasses


@dataclasses.dataclass(frozen=True)
class Cell:
    """One re-created unit of memory."""
    agent: str
    addr: int
    size: int
    pool: str | None = None     # set for layout slots
    layer: int | None = None
    slot: int | None = None

    def label(self) -> str:
        if self.pool is not None:
            return f"{self.agent}:{self.pool}/L{self.layer}/slot {self.slot}"
        return f"{self.agent}:{self.addr:#x}+{self.size}"


class _Region:
    """A contiguous address range of one agent; regular (layout) or cut at boundaries."""

    def __init__(self, start: int, end: int, pool=None, layer=None, slot_bytes=None):
        self.start, self.end = start, end
        self.pool, self.layer, self.slot_bytes = pool, layer, slot_bytes
        self.bounds: set[int] = {start, end}

    def cell_span(self, addr: int) -> tuple[int, int, tuple]:
        """(cell start, cell end, cell key) of the cell holding ``addr``."""
        if self.slot_bytes:
            s = (addr - self.start) // self.slot_bytes
            a = self.start + s * self.slot_bytes
            return a, min(a + self.slot_bytes, self.end), ("L", self.pool, self.layer, s)
        b = self._sorted
        i = bisect.bisect_right(b, addr) - 1
        return b[i], b[i + 1], ("R", b[i])


class MemoryMap:
    """Cells of every agent, created on first use; ids are dense ints in creation order."""

    def __init__(self) -> None:
        self.cells: list[Cell] = []
        self._ids: dict[tuple, int] = {}
        self._regions: dict[str, list[_Region]] = {}
        self._layout: dict[tuple, _Region] = {}
        self._sorted_regions: dict[str, tuple] = {}

    # -- building ---------------------------------------------------------------------
    def add_layout(self, agent: str, pool: str, layer: int, addr: int, slot_bytes: int, num_slots: int) -> None:
        """A (pool, layer) region of ``num_slots`` slots of ``slot_bytes`` at ``addr``."""
        r = _Region(addr, addr + slot_bytes * num_slots, pool, layer, slot_bytes)
        self._layout[(agent, pool, layer)] = r
        self._add(agent, r)

    def add_range(self, agent: str, addr: int, nbytes: int) -> None:
        """A registered region or prepared-list entry; ignored where layouts already cover it."""
        if nbytes <= 0 or self._covered(agent, addr, nbytes):
            return
        for r in self._regions.get(agent, []):
            if r.slot_bytes is None and r.start <= addr + nbytes and addr <= r.end:
                # overlapping unstructured ranges merge; their edges become cell boundaries
                r.bounds.update((addr, addr + nbytes, r.start, r.end))
                r.start, r.end = min(r.start, addr), max(r.end, addr + nbytes)
                return
        self._add(agent, _Region(addr, addr + nbytes))

    def add_boundary(self, agent: str, addr: int, nbytes: int) -> None:
        """Cut unstructured regions at a descriptor's edges (so cells never straddle one)."""
        for r in self._regions.get(agent, []):
            if r.slot_bytes is None and r.start <= addr < r.end:
                r.bounds.update(b for b in (addr, addr + nbytes) if r.start <= b <= r.end)

    def finish(self) -> None:
        """Freeze the boundaries; call after every add_*.

        Layout regions win where they overlap a registered range (one registration often
        spans every layer): lookups try layouts first, and raw ranges are cut at layout
        edges so no raw cell straddles one."""
        for agent, regs in self._regions.items():
            lay = sorted((r for r in regs if r.slot_bytes), key=lambda r: r.start)
            raw = sorted((r for r in regs if not r.slot_bytes), key=lambda r: r.start)
            for r in raw:
                for q in lay:
                    r.bounds.update(b for b in (q.start, q.end) if r.start < b < r.end)
                r._sorted = sorted(r.bounds)
            self._sorted_regions[agent] = (lay, [r.start for r in lay], raw, [r.start for r in raw])

    def _add(self, agent: str, r: _Region) -> None:
        self._regions.setdefault(agent, []).append(r)

    def _covered(self, agent: str, addr: int, nbytes: int) -> bool:
        return any(r.slot_bytes and r.start <= addr and addr + nbytes <= r.end
                   for r in self._regions.get(agent, []))

    # -- lookups ----------------------------------------------------------------------
    def _cell(self, agent: str, start: int, end: int, key: tuple, r: _Region) -> int:
        k = (agent,) + key
        cid = self._ids.get(k)
        if cid is None:
            cid = self._ids[k] = len(self.cells)
            if key[0] == "L":
                self.cells.append(Cell(agent, start, end - start, r.pool, r.layer, key[3]))
            else:
                self.cells.append(Cell(agent, start, end - start))
        return cid

    def slot_cell(self, agent: str, pool: str, layer: int, slot: int) -> int | None:
        """The cell of a slot, or None when no layout describes it."""
        r = self._layout.get((agent, pool, layer))
        if r is None or slot < 0 or r.start + (slot + 1) * r.slot_bytes > r.end:
            return None
        a = r.start + slot * r.slot_bytes
        return self._cell(agent, a, a + r.slot_bytes, ("L", pool, layer, slot), r)

    def has_layout(self, agent: str, pool: str, layer: int) -> bool:
        return (agent, pool, layer) in self._layout

    def pieces(self, agent: str, addr: int, nbytes: int) -> list[tuple[int, int, int]] | None:
        """[(cell, offset in cell, nbytes)] covering [addr, addr+nbytes), or None if any
        byte lies outside every known region."""
        found = self._sorted_regions.get(agent)
        if not found:
            return None
        lay, lay_starts, raw, raw_starts = found
        out, a, end = [], addr, addr + nbytes
        while a < end:
            r = _find(lay, lay_starts, a) or _find(raw, raw_starts, a)
            if r is None:
                return None
            cs, ce, key = r.cell_span(a)
            n = min(ce, end) - a
            out.append((self._cell(agent, cs, ce, key, r), a - cs, n))
            a += n
        return out


def _find(regs: list, starts: list, a: int):
    i = bisect.bisect_right(starts, a) - 1
    return regs[i] if i >= 0 and a < regs[i].end else None


def pair_pieces(src: list, dst: list) -> list[tuple[int, int, int, int, int]]:
    """Common refinement of source and destination pieces: (src cell, src off, dst cell, dst off, n)."""
    out, i, j = [], 0, 0
    so = do = 0  # bytes consumed of the current src/dst piece
    while i < len(src) and j < len(dst):
        sc, soff, sn = src[i]
        dc, doff, dn = dst[j]
        n = min(sn - so, dn - do)
        out.append((sc, soff + so, dc, doff + do, n))
        so += n
        do += n
        if so == sn:
            i, so = i + 1, 0
        if do == dn:
            j, do = j + 1, 0
    return out
