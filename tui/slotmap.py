"""SlotMap: the slots of one agent's pool at the cursor's moment, coloured by owner.

A cell shows the slot number; its colour is its owner request (free slots are dim),
``▼``/``▲`` mark bytes of an in-flight transfer landing in / leaving the slot, and a red
cell is a hazard (a transfer still moving bytes for a request that no longer holds the
slot, or a slot named by a finding). Enter on a slot filters the timeline to its history.
"""
from __future__ import annotations

import zlib

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

PALETTE = ("dodger_blue2", "green3", "dark_orange", "medium_purple", "gold3", "deep_pink3",
           "turquoise2", "chartreuse3", "orchid", "light_salmon3", "steel_blue", "khaki3")
CELL = 5


def owner_color(request: str) -> str:
    """A stable colour per request (crc32: the same request keeps its colour across runs)."""
    return PALETTE[zlib.crc32(request.encode()) % len(PALETTE)]


class SlotMap(Widget, can_focus=True):
    """Grid of slots; arrow keys choose one, Enter posts :class:`SlotMap.SlotChosen`."""

    BINDINGS = [
        Binding("left,h", "move(-1)", "Slot ←", show=False),
        Binding("right,l", "move(1)", "Slot →", show=False),
        Binding("up", "move_row(-1)", "Row ↑", show=False),
        Binding("down", "move_row(1)", "Row ↓", show=False),
        Binding("enter", "choose", "Slot history"),
        Binding("left_square_bracket", "pool(-1)", "Prev pool"),
        Binding("right_square_bracket", "pool(1)", "Next pool"),
    ]

    selected: reactive[int] = reactive(0)

    class SlotChosen(Message):
        """The user asked for the history of one slot."""

        def __init__(self, agent: str, pool: str, slot: int):
            super().__init__()
            self.agent, self.pool, self.slot = agent, pool, slot

    class PoolStep(Message):
        """The user asked for the previous/next pool."""

        def __init__(self, step: int):
            super().__init__()
            self.step = step

    def __init__(self, **kw):
        super().__init__(**kw)
        self.agent: str | None = None
        self.pool: str | None = None
        self.cells: list = []
        self.moment: str = ""

    def show(self, agent: str, pool: str, cells: list, moment: str) -> None:
        """Display ``cells`` (facts.SlotCell) of (agent, pool) at ``moment``."""
        if (agent, pool) != (self.agent, self.pool):
            self.selected = 0
        self.agent, self.pool, self.cells, self.moment = agent, pool, cells, moment
        self.refresh(layout=True)

    def _per_row(self) -> int:
        return max(1, (self.size.width or 80) // CELL)

    def get_content_height(self, container, viewport, width: int) -> int:
        per = max(1, width // CELL)
        return 3 + (len(self.cells) + per - 1) // per

    def render(self) -> Text:
        if self.agent is None:
            return Text("no pool: the trace has no layouts or slot events", style="dim")
        t = Text(no_wrap=True)
        busy = sum(1 for c in self.cells if c.owners)
        moving = sum(1 for c in self.cells if c.xfer_in or c.xfer_out)
        bad = sum(1 for c in self.cells if c.hazard)
        t.append(f"{self.agent}/{self.pool}", "bold")
        t.append(f"  {busy}/{len(self.cells)} held, {moving} in flight")
        if bad:
            t.append(f", {bad} hazard{'s' * (bad != 1)}", "bold red")
        t.append(f"   {self.moment}\n", "grey50")
        per = self._per_row()
        for i, c in enumerate(self.cells):
            mark = "▼" if c.xfer_in else ("▲" if c.xfer_out else " ")
            label = f"{c.slot:>3}{mark} "
            if c.hazard:
                style = "bold white on red"
            elif c.owners:
                style = f"black on {owner_color(c.owners[0])}"
            else:
                style = "grey42"
            if i == self.selected and self.has_focus:
                style += " reverse"
            elif i == self.selected:
                style += " underline"
            t.append(label[:CELL], style)
            if (i + 1) % per == 0 and i + 1 < len(self.cells):
                t.append("\n")
        t.append("\n")
        if self.cells:
            t.append_text(self.describe(self.cells[min(self.selected, len(self.cells) - 1)]))
        return t

    @staticmethod
    def describe(c) -> Text:
        """One line about a slot: owners, transfers in flight, hazard."""
        t = Text(f"slot {c.slot}: ")
        t.append(("held by " + ", ".join(c.owners) + (" (shared)" if c.shared else "")) if c.owners else "free")
        for lst, arrow in ((c.xfer_in, "in ▼"), (c.xfer_out, "out ▲")):
            for shard, xfer, req in lst[:3]:
                t.append(f"; {arrow} {shard}#x{xfer} ({req})")
        if c.hazard:
            t.append(f"; {c.hazard}", "bold red")
        return t

    def _clamp(self, i: int) -> int:
        return max(0, min(i, len(self.cells) - 1))

    def action_move(self, n: int) -> None:
        self.selected = self._clamp(self.selected + n)

    def action_move_row(self, n: int) -> None:
        self.selected = self._clamp(self.selected + n * self._per_row())

    def action_choose(self) -> None:
        if self.agent is not None and self.cells:
            self.post_message(self.SlotChosen(self.agent, self.pool, self.cells[self.selected].slot))

    def action_pool(self, n: int) -> None:
        self.post_message(self.PoolStep(n))

    def on_click(self, event) -> None:
        off = event.get_content_offset(self)
        if off is not None and off.y >= 1:
            i = (off.y - 1) * self._per_row() + off.x // CELL
            if 0 <= i < len(self.cells):
                self.selected = i
