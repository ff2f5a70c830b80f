"""Edit: the one interface a what-if uses to re-derive the recorded program.

A what-if never changes the loaded graph; it describes changes on an ``Edit`` and
``build()`` returns a new graph with the same operation ids (the recorded events and
the moves of every transfer), so a schedule of the recorded program can be followed in
the fixed one. What can change is what the fix changes in a real program: what an
operation waits for, which memory it touches, which bytes a transfer moves (where the
threads of a process then touch the same cells, the fixed graph keeps their recorded
order as loading does: graph.py ``recorded_order_waits``).

    def my_fix(edit, args):                       # --what-if my_module:my_fix[:ARGS]
        g = edit.graph                            # the recorded program (read-only)
        for t in g.transfers:                     # e.g. a status message after the data
            ...
            edit.add_wait(recv_op, move_op)       # recv_op runs only after move_op
        edit.note("what changed, in words")
"""
from __future__ import annotations

import copy
import dataclasses

from ..graph import recorded_order_waits
from ..hb import HappensBefore


class Edit:
    """Changes to a graph, applied by ``build()``."""

    def __init__(self, graph):
        self.graph = graph
        self._waits: dict[int, list[int]] = {}
        self._cells: dict[int, list] = {}
        self._pieces: dict[int, list] = {}
        self._transfers: dict[int, object] = {}
        self._new_cells: list = []
        self.lines: list[str] = []
        self._hb = None

    # -- reading -----------------------------------------------------------------------
    @property
    def hb(self) -> HappensBefore:
        """Happens-before of the recorded program (computed once)."""
        if self._hb is None:
            self._hb = HappensBefore(self.graph)
        return self._hb

    def waits(self, op: int) -> list[int]:
        """What ``op`` waits for, with the edits so far."""
        return self._waits.get(op, self.graph.waits[op])

    def pieces(self, move: int) -> list[tuple]:
        """(src cell, src off, dst cell, dst off, nbytes) a move copies, with the edits so far."""
        return self._pieces.get(move, self.graph.move_pieces[move - self.graph.n_prog])

    def cell(self, cell: int):
        """The Cell (agent, addr, size, pool, layer, slot) of a cell id, new ones included."""
        n = len(self.graph.mem.cells)
        return self.graph.mem.cells[cell] if cell < n else self._new_cells[cell - n]

    def cells(self, op: int) -> list:
        """The cells a write or read touches (one per slot), with the edits so far."""
        return self._cells.get(op, self.graph.cells[op])

    # -- changing ----------------------------------------------------------------------
    def add_wait(self, op: int, on: int) -> None:
        """``op`` runs only after ``on`` (a program op or a move)."""
        w = self._waits.setdefault(op, list(self.graph.waits[op]))
        if on not in w:
            w.append(on)

    def drop_wait(self, op: int, on: int) -> None:
        """``op`` no longer waits for ``on``."""
        w = self._waits.setdefault(op, list(self.graph.waits[op]))
        if on in w:
            w.remove(on)

    def set_cells(self, op: int, cells: list) -> None:
        """A write or read touches these cells instead (one per slot)."""
        self._cells[op] = list(cells)

    def set_pieces(self, move: int, pieces: list[tuple]) -> None:
        """A move copies these pieces instead."""
        self._pieces[move] = list(pieces)

    def set_transfer(self, index: int, transfer) -> None:
        """Replace a transfer's description (e.g. its descriptors and out-of-bounds list)."""
        self._transfers[index] = transfer

    def new_cell(self, like: int) -> int:
        """A fresh cell shaped like ``like`` (same agent, pool, layer, slot and size):
        memory the fixed program uses instead, e.g. another page of the pool."""
        g = self.graph
        self._new_cells.append(g.mem.cells[like])
        return len(g.mem.cells) + len(self._new_cells) - 1

    def note(self, text: str) -> None:
        """A line saying what the fix changed (shown with the replay)."""
        self.lines.append(text)

    # -- result ------------------------------------------------------------------------
    def build(self):
        """The fixed graph (a new object; the recorded one is unchanged)."""
        g = self.graph
        waits = list(g.waits)
        for op, w in self._waits.items():
            waits[op] = w
        cells = list(g.cells)
        for op, c in self._cells.items():
            cells[op] = c
        pieces = list(g.move_pieces)
        for m, p in self._pieces.items():
            pieces[m - g.n_prog] = p
        transfers = list(g.transfers)
        for i, t in self._transfers.items():
            transfers[i] = t
        mem = g.mem
        if self._new_cells:
            mem = copy.copy(g.mem)
            mem.cells = list(g.mem.cells) + self._new_cells
        order = g.order_waits
        if self._cells or self._pieces or self._transfers:
            # threads keep their recorded order where they touch the same cell: re-derived
            # from what the fixed program touches (edits to the waits themselves stay)
            order = recorded_order_waits(g.col, g.thread_of, cells, transfers, pieces, mem)
            for op, (old, new) in enumerate(zip(g.order_waits, order)):
                if old != new:
                    w = list(waits[op])
                    for x in old:
                        if x in w:
                            w.remove(x)
                    waits[op] = w + new
        return dataclasses.replace(g, waits=waits, cells=cells, move_pieces=pieces, transfers=transfers,
                                   mem=mem, notes=list(g.notes), order_waits=order)
