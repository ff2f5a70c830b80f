"""KvtraceApp: the timeline on top, findings / transfer / slots / SQL below, a status
line and the key footer. Panels refresh in a worker shortly after the cursor settles,
so stepping costs only the timeline's page read."""
from __future__ import annotations

import gc
import os

from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane

from .console import SqlConsole
from .facts import Facts, xfer_key
from .filters import Filter, FilterError, parse_filter
from .findings_panel import FindingsPanel
from .follow import Follow, follow_predicate
from .help import HelpScreen
from .inspector import TransferInspector
from .slotmap import SlotMap
from .timeline import TimelineView

PANEL_DELAY = 0.08   # s after the last step before the side panels are recomputed


class KvtraceApp(App):
    """``kvtrace tui TRACE``. Args: source (TimelineSource), findings: run the checks."""

    CSS_PATH = "app.tcss"
    TITLE = "kvtrace"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("slash", "open_bar('filter')", "Filter"),
        Binding("colon", "open_bar('jump')", "Jump", show=False),   # in the help page and the palette
        # n/p/m are taught by the status line ("n/p: request r1") and the help page; the
        # footer keeps room for the panel keys at 80 columns
        Binding("n", "follow(1)", "Next", show=False),
        Binding("p", "follow(-1)", "Prev", show=False),
        Binding("m", "cycle_follow", "Follow", show=False),
        # the panel keys are shown in the footer: a new user's first question is how to reach them
        Binding("f", "panel('findings')", "Findings"),
        Binding("t", "panel('transfer')", "Transfer"),
        Binding("s", "panel('slots')", "Slots"),
        Binding("e", "panel('sql')", "SQL"),
        Binding("escape", "escape", "Clear", show=False),
    ]

    def __init__(self, source, run_findings: bool = True):
        super().__init__()
        self.source, self.facts = source, Facts(source)
        self.run_findings = run_findings
        self.follow = Follow.REQUEST
        self.findings: list | None = None
        self.carried: dict = {}   # (shard, xfer) -> attributions of corrupted reads it carried
        self.finding_ords: list[int] = []
        self.hazards: dict[tuple[str, str], dict[int, str]] = {}
        self.pool_choice: tuple[str, str] | None = None
        self.pool_chosen = False        # the user picked a pool ([ ]): the findings do not move it
        self.finding_pool: tuple[str, str] | None = None   # the followed finding's pool
        self.slot_choice: tuple[str, str, int] | None = None
        self.panel_generation = 0       # bumps on every refresh: tests wait on it
        self.sub_title = os.path.basename(source.session.path.rstrip("/"))

    def compose(self):
        yield Static(id="status")
        yield Input(id="filter", placeholder="filter: request=r1 agent=decode pool=kv slot=5 kind=free text")
        yield Input(id="jump", placeholder="jump: row | shard:seq | seq N | @1.5ms")
        yield TimelineView(self.source, id="timeline")
        with TabbedContent(id="panels", initial="findings"):
            with TabPane("Findings (f)", id="findings"):
                yield FindingsPanel(id="findings-panel")
            with TabPane("Transfer (t)", id="transfer"):
                yield TransferInspector(id="inspector")
            with TabPane("Slots (s)", id="slots"):
                yield SlotMap(id="slotmap")
            with TabPane("SQL (e)", id="sql"):
                yield SqlConsole(self.source.con.cursor(), id="console")
        yield Footer()

    def on_mount(self) -> None:
        # the objects made while opening live as long as the app: keep them out of the
        # full collections that otherwise pause a step now and then (~70 ms at 10M events)
        gc.freeze()
        self.query_one(TimelineView).focus()
        self.update_status()
        if self.run_findings:
            self.load_findings()
        else:
            self.query_one(FindingsPanel).show_error("not run (--no-checks)")

    # -- status and panels -----------------------------------------------------
    @property
    def timeline(self) -> TimelineView:
        return self.query_one(TimelineView)

    def update_status(self) -> None:
        if not self.query(TimelineView):
            return
        tl, src = self.timeline, self.source
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f" {tl.cursor + 1 if src.count else 0}/{src.count}", "bold")
        if src.filtered:
            t.append(f" of {src.total}", "grey50")
        fp = follow_predicate(self.follow, tl.row, self.slot_choice)
        label = f"finding ({len(self.finding_ords)} events)" if self.follow is Follow.FINDING else (fp[1] if fp else "-")
        t.append("  n/p: ", "grey50").append(label, "cyan")
        if not src.filter.empty:
            t.append("  filter: ", "grey50").append(src.filter.describe(), "yellow")
        self.query_one("#status", Static).update(t)

    def on_timeline_view_cursor_moved(self, msg: TimelineView.CursorMoved) -> None:
        self.update_status()
        if getattr(self, "_panel_timer", None):
            self._panel_timer.stop()
        self._panel_timer = self.set_timer(PANEL_DELAY, self.refresh_panels)

    def refresh_panels(self) -> None:
        """Recompute the slot map and the inspector for the cursor's event (in a worker)."""
        if not self.query(TimelineView):
            return      # the timer fired while the app shuts down
        row = self.timeline.row
        if row is None:
            return
        if self.follow is Follow.FINDING and self.finding_pool is not None:
            self.pool_choice = self.finding_pool   # stay on the finding's pool while walking it
        elif row.get("pool") is not None and row.get("agent") is not None:
            self.pool_choice = (row["agent"], row["pool"])
        self._load_panels(row, self.pool_choice)

    @work(thread=True, exclusive=True, group="panels")
    def _load_panels(self, row: dict, pool: tuple[str, str] | None) -> None:
        if pool is None and self.facts.pools():   # no pool yet: the first one (the facts may still be building)
            pool = self.facts.pools()[0][:2]
            self.call_from_thread(setattr, self, "pool_choice", self.pool_choice or pool)
        k = xfer_key(row)
        view = self.facts.transfer(k[0], k[1], row["ord"]) if k else None
        cells = None
        if pool is not None:
            n = next((p[2] for p in self.facts.pools() if p[:2] == pool), 0)
            cells = self.facts.slot_map(pool[0], pool[1], row["ord"], n or 0, self.hazards.get(pool))
        self.call_from_thread(self._show_panels, row, pool, view, cells)

    def _show_panels(self, row, pool, view, cells) -> None:
        # panels computed while the app shuts down arrive after its widgets went, one by one
        if not self.query(TransferInspector) or not self.query(SlotMap):
            return
        self.query_one(TransferInspector).show(view, self.carried.get((view.shard, view.xfer)) if view else None)
        if pool is not None:
            self.query_one(SlotMap).show(pool[0], pool[1], cells, f"@row {row['ord']}")
        self.panel_generation += 1

    @work(thread=True, exclusive=True, group="findings")
    def load_findings(self) -> None:
        session = self.source.session
        try:
            self.source.wait_ready()   # the session's connection is the background build's until then
            found = session.findings()
            who = session.attribute(found)     # who wrote the bytes of each corrupted read
            self.carried = {}
            for a in who:
                if a.carrier:
                    self.carried.setdefault((a.carrier["shard"], a.carrier["xfer"]), []).append(a.message)
        except Exception as e:  # a check's SQL failing must not take the timeline down
            self.call_from_thread(self.query_one(FindingsPanel).show_error, str(e).splitlines()[0] if str(e) else type(e).__name__)
            return
        self.call_from_thread(self._show_findings, found, list(session.checks_skipped),
                              list(session.checks_partial))

    def _show_findings(self, found: list, skipped: list, partial: list | None = None) -> None:
        if not self.query(FindingsPanel):
            return
        self.findings = found
        for f in found:
            if f.agent and f.pool:
                d = self.hazards.setdefault((f.agent, f.pool), {})
                for s in (f.slots or ([f.slot] if f.slot is not None else [])):
                    d.setdefault(s, f"{f.check}: {f.message}")
        self.query_one(FindingsPanel).show(found, skipped, partial)
        first = next((f for f in found if f.agent and f.pool), None)
        if first is not None and not self.pool_chosen:   # open the slot map where the first finding is
            self.pool_choice = (first.agent, first.pool)
            if self.timeline.row is not None:
                self._load_panels(self.timeline.row, self.pool_choice)
            return
        self.refresh_panels()

    # -- messages from panels ---------------------------------------------------
    def on_findings_panel_finding_chosen(self, msg: FindingsPanel.FindingChosen) -> None:
        f = msg.finding
        ords = sorted(o for o in (self.source.ord_of(s, q) for s, q in f.events) if o is not None)
        if not ords:
            self.notify("this finding names no events", severity="warning")
            return
        self.finding_ords, self.follow = ords, Follow.FINDING
        self.finding_pool = (f.agent, f.pool) if f.agent and f.pool else None
        if self.finding_pool:
            self.pool_choice = self.finding_pool
        self.set_filter(Filter())
        self.timeline.move_to_ord(ords[0])
        self.timeline.focus()

    def on_slot_map_slot_chosen(self, msg: SlotMap.SlotChosen) -> None:
        self.slot_choice = (msg.agent, msg.pool, msg.slot)
        self.follow = Follow.SLOT
        self.set_filter(Filter(agent=msg.agent, pool=msg.pool, slot=msg.slot))
        self.timeline.focus()

    def on_slot_map_pool_step(self, msg: SlotMap.PoolStep) -> None:
        pools = [p[:2] for p in self.facts.pools()]
        if pools:
            i = pools.index(self.pool_choice) if self.pool_choice in pools else 0
            self.pool_choice = pools[(i + msg.step) % len(pools)]
            self.pool_chosen, self.finding_pool = True, None
            self._load_panels(self.timeline.row, self.pool_choice)

    # -- filter and jump bars ---------------------------------------------------
    def set_filter(self, flt: Filter) -> None:
        """Show only matching events, keeping the cursor near the same event."""
        cur = self.timeline.row
        self.source.set_filter(flt)
        self.query_one("#filter", Input).value = flt.describe()
        self.timeline.reload(self.source.position_of(cur["ord"]) if cur else 0)
        self.update_status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            if event.input.id == "filter":
                self.set_filter(parse_filter(event.value))
            elif event.input.id == "jump":
                o = self.source.resolve_jump(event.value)
                if o is None:
                    raise ValueError(f"jump: nothing at {event.value!r}")
                self.timeline.move_to_ord(o)
            else:
                return
        except (FilterError, ValueError) as e:
            self.notify(str(e), severity="error")
            return
        event.input.remove_class("open")
        self.timeline.focus()

    def action_open_bar(self, which: str) -> None:
        bar = self.query_one(f"#{which}", Input)
        bar.add_class("open")
        bar.focus()

    def action_escape(self) -> None:
        bars = [b for b in self.query(Input) if b.has_class("open")]
        for b in bars:
            b.remove_class("open")
        if not bars and not self.source.filter.empty:
            self.slot_choice = None
            self.set_filter(Filter())
        self.timeline.focus()

    # -- follow -------------------------------------------------------------------
    def action_follow(self, step: int) -> None:
        tl = self.timeline
        row = tl.row
        if row is None:
            return
        if self.follow is Follow.FINDING:
            cand = [o for o in self.finding_ords if (o > row["ord"] if step > 0 else o < row["ord"])]
            target = (cand[0] if step > 0 else cand[-1]) if cand else None
        else:
            fp = follow_predicate(self.follow, row, self.slot_choice)
            if fp is None:
                self.notify(f"this event has no {self.follow.value} to follow", severity="warning")
                return
            target = self.source.find(fp[0], row["ord"], forward=step > 0)
        if target is None:
            self.bell()
        else:
            tl.move_to_ord(target)

    def action_cycle_follow(self) -> None:
        self.follow = self.follow.next(bool(self.finding_ords))
        self.update_status()

    def action_panel(self, name: str) -> None:
        self.query_one(TabbedContent).active = name
        focus = {"findings": "#findings-table", "transfer": "#inspector", "slots": "#slotmap", "sql": "#sql-input"}
        self.query_one(focus[name]).focus()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_, cb in [
            ("Filter the timeline", "request=, agent=, pool=, slot=, kind=, free text", lambda: self.action_open_bar("filter")),
            ("Jump to row, shard:seq or time", "e.g. decode:42 or @1.5ms", lambda: self.action_open_bar("jump")),
            ("Clear the filter", "show every event again", lambda: self.set_filter(Filter())),
            ("Findings", "the checks' findings; Enter jumps to the events", lambda: self.action_panel("findings")),
            ("Transfer inspector", "the transfer under the cursor", lambda: self.action_panel("transfer")),
            ("Slot map", "the pool's slots at the cursor's moment", lambda: self.action_panel("slots")),
            ("SQL console", "read-only SQL over the trace", lambda: self.action_panel("sql")),
            ("Follow next mode", "n/p step by request, slot, transfer or finding", self.action_cycle_follow),
            ("Keys and panels", "the help page", self.action_help),
        ]:
            yield SystemCommand(title, help_, cb)
