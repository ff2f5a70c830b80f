"""TransferInspector: the transfer under the cursor — its state, its post, completion and
notification events, and its descriptors with both ends resolved to
(pool, layer, slot, offset); a descriptor whose ends disagree is highlighted."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from .facts import DESC_LIMIT, XferState, desc_problem
from .rows import KIND_STYLE, what

STATE_STYLE = {XferState.IN_FLIGHT: "bold yellow", XferState.DONE: "green", XferState.NOTIFIED: "green",
               XferState.ERROR: "bold red", XferState.RELEASED: "yellow", XferState.NOT_POSTED: "grey50"}


def _end(agent, pool, layer, slot, off, page=None) -> str:
    if pool is None:
        return f"{agent}:?"
    return f"{agent}:{pool}/L{layer}/s{slot}" + (f"+{off}" if off else "") + (f" p{page}" if page is not None else "")


def _plain(v):
    return Text(v) if isinstance(v, str) else v


def render_transfer(view, carried=None) -> Group:
    """The inspector's content for a facts.TransferView (None: nothing selected);
    ``carried``: sentences on corrupted reads whose bytes this transfer carried."""
    if view is None:
        return Group(Text("No transfer under the cursor: put it on an xfer_* event or a "
                          "notification that a post delivered.", style="dim"))
    head = Text()
    head.append(f"transfer {view.shard}#x{view.xfer}", "bold")
    p = view.post
    if p:
        head.append(f"  request {p['request'] or '-'}  {p['agent']} → {p['peer']}")
        if p.get("msg") is not None:
            head.append(f"  notif '{bytes(p['msg']).decode(errors='replace')}'")
    head.append("  state: ")
    head.append(view.state.value, STATE_STYLE[view.state])
    bad = view.mismatches
    head.append(f"\n{view.ndescs} descriptors", "")
    if bad:
        head.append(f", {bad} mismatched", "bold red")
    if view.ndescs > len(view.descs):
        head.append(f" (first {DESC_LIMIT} shown)", "grey50")
    ev = Table(box=None, show_header=False, pad_edge=False, expand=True)
    ev.add_column("row", justify="right", style="grey50", no_wrap=True)
    ev.add_column("where", no_wrap=True)
    ev.add_column("kind", no_wrap=True)
    ev.add_column("what", ratio=1, no_wrap=True, overflow="ellipsis")
    for e in view.events:
        # names and messages come from the trace: Text, so "[...]" is never read as markup
        ev.add_row(str(e["ord"]), Text(f"{e['shard']}:{e['seq']}"), Text(str(e["kind"]), KIND_STYLE.get(e["kind"], "")),
                   _plain(what(e)))
    ds = Table(box=None, expand=True, header_style="bold", pad_edge=False)
    for c in ("#", "source (pool/layer/slot+off page)", "destination", "bytes", "check"):
        ds.add_column(c, no_wrap=True, overflow="ellipsis")
    for d in view.descs:
        prob = desc_problem(d)
        ds.add_row(str(d["pos"]),
                   Text(_end(d["src_agent"], d["src_pool"], d["src_layer"], d["src_slot"], d["src_off"], d.get("src_page"))),
                   Text(_end(d["dst_agent"], d["dst_pool"], d["dst_layer"], d["dst_slot"], d["dst_off"], d.get("dst_page"))),
                   str(d["nbytes"]), Text(prob or "ok", "bold red" if prob else "green"),
                   style="on dark_red" if prob else None)
    if not carried:
        return Group(head, ev, ds)
    who = Text(f"\nWho wrote these bytes — {len(carried)} corrupted read(s) got their bytes through this transfer:\n",
               "bold red")
    for m in carried[:8]:
        who.append(f"  {m}\n", "")
    return Group(head, who, ev, ds)


def first_mismatch_line(body: Group, view, width: int = 80) -> int | None:
    """The line of ``render_transfer``'s output, rendered ``width`` columns wide, that holds
    the first mismatched descriptor: the parts above the descriptor table as they wrap,
    the table's header, then one line per row (its cells do not wrap)."""
    from rich.console import Console

    if view is None:
        return None
    bad = next((i for i, d in enumerate(view.descs) if desc_problem(d)), None)
    if bad is None:
        return None
    *above, _ds = body.renderables
    con = Console(width=max(20, width), file=None, color_system=None)
    lines = sum(len(con.render_lines(part, con.options, pad=False)) for part in above)
    return lines + 1 + bad


class TransferInspector(VerticalScroll, can_focus=True):
    """Scrollable view of one transfer (see render_transfer)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.view = None
        self._body = None            # what the body shows (for the scroll target's line)
        self._scroll_pending = False  # a new transfer was shown and not yet scrolled to
        self._scroll_tries = 0

    def compose(self):
        yield Static(render_transfer(None), id="inspector-body")

    def show(self, view, carried=None) -> None:
        """Display a facts.TransferView (or None), with the corrupted reads it carried,
        scrolled so the first mismatched descriptor is in view (not the ok rows above it)."""
        bodies = self.query("#inspector-body")
        if not bodies:
            return      # the panel is being torn down (the app is closing)
        changed = view is None or self.view is None or (view.shard, view.xfer) != (self.view.shard, self.view.xfer)
        self.view = view
        self._body = render_transfer(view, carried)
        bodies.first(Static).update(self._body)
        if changed:
            self._scroll_pending, self._scroll_tries = True, 0
            self.call_after_refresh(self._apply_scroll)

    def on_show(self) -> None:
        self._retry_scroll()

    def on_resize(self) -> None:
        self._retry_scroll()

    def _retry_scroll(self) -> None:
        if self._scroll_pending:
            self._scroll_tries = 0
            self.call_after_refresh(self._apply_scroll)

    def _apply_scroll(self) -> None:
        """Scroll to the first mismatched descriptor once the new content is laid out (the
        scroll range grows a refresh or two after the update). In a tab not shown yet the
        panel has no size: the scroll waits for it to be shown (on_show / on_resize), and
        the line is computed at the width it is shown at."""
        if not self._scroll_pending or not self.size.height or not self.content_size.width:
            return
        line = first_mismatch_line(self._body, self.view, self.content_size.width)
        target = max(0, line - 2) if line is not None else 0
        if self.max_scroll_y < target and self._scroll_tries < 10:
            self._scroll_tries += 1
            self.call_after_refresh(self._apply_scroll)
            return
        self.scroll_to(y=target, animate=False)
        self._scroll_pending = False
