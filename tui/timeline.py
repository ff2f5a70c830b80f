"""TimelineView: every event in happens-before order, drawn line by line from pages.

The Line API (``render_line``) asks only for the rows on screen, which the
TimelineSource reads a page at a time — the widget never holds the trace (the toolong
pattern; a DataTable would keep every row as Python objects).
"""
from __future__ import annotations

from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .rows import format_row, header


class TimelineView(ScrollView, can_focus=True):
    """The event list with a cursor; posts :class:`TimelineView.CursorMoved`."""

    BINDINGS = [
        Binding("j,down", "step(1)", "Step", show=False),
        Binding("k,up", "step(-1)", "Back", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("g,home", "first", "First", show=False),
        Binding("G,end", "last", "Last", show=False),
    ]

    cursor: reactive[int] = reactive(0, repaint=False, always_update=False)
    """Visible position of the selected event."""

    class CursorMoved(Message):
        """The cursor is on a new event (row is None on an empty view)."""

        def __init__(self, pos: int, row: dict | None):
            super().__init__()
            self.pos, self.row = pos, row

    def __init__(self, source, **kw):
        super().__init__(**kw)
        self.source = source

    def on_mount(self) -> None:
        self.reload()

    def reload(self, pos: int | None = None) -> None:
        """The visible rows changed (filter): resize and put the cursor at ``pos``."""
        self.virtual_size = Size(1, self.source.count + 1)   # +1: header line
        self.move_to(self.cursor if pos is None else pos, force=True)

    @property
    def row(self) -> dict | None:
        """The event under the cursor."""
        return self.source.row(self.cursor)

    def move_to(self, pos: int, force: bool = False) -> None:
        """Put the cursor on visible position ``pos`` (clamped) and keep it in view."""
        pos = max(0, min(int(pos), self.source.count - 1))
        if pos == self.cursor and not force:
            return
        old, self.cursor = self.cursor, pos
        self._scroll_cursor()
        self.refresh_line_for(old)
        self.refresh_line_for(pos)
        self.post_message(self.CursorMoved(pos, self.source.row(pos)))

    def move_to_ord(self, ord_: int) -> None:
        """Put the cursor on event ``ord_`` (or the first visible one after it)."""
        self.move_to(self.source.position_of(ord_))

    def _scroll_cursor(self) -> None:
        h = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + h:
            self.scroll_to(y=self.cursor - h + 1, animate=False, immediate=True)

    def refresh_line_for(self, pos: int) -> None:
        y = pos - int(self.scroll_offset.y) + 1
        if 0 <= y < self.size.height:
            self.refresh_line(y)
        else:
            self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return Strip(list(header(width).render(self.app.console)), width)
        pos = int(self.scroll_offset.y) + y - 1
        row = self.source.row(pos)
        if row is None:
            return Strip([Segment(" " * width)], width)
        text = format_row(row, width, selected=pos == self.cursor,
                          t0=self.source.t0)
        return Strip(list(text.render(self.app.console)), width)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.refresh()

    # -- actions -----------------------------------------------------------------
    def action_step(self, n: int) -> None:
        self.move_to(self.cursor + n)

    def action_page(self, n: int) -> None:
        self.move_to(self.cursor + n * max(1, self.scrollable_content_region.height - 2))

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        self.move_to(self.source.count - 1)

    def on_click(self, event) -> None:
        off = event.get_content_offset(self)
        if off is not None and off.y >= 1:
            self.move_to(int(self.scroll_offset.y) + off.y - 1)
