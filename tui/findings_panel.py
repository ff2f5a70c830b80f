"""FindingsPanel: the checks' findings with counts per check; Enter jumps to the events
involved. Findings come from ``TraceSession.findings()`` (kvtrace.analysis), run in a
worker so the timeline is usable while the checks run."""
from __future__ import annotations

import collections

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static


def counts_line(findings: list, skipped: list, partial: list | None = None) -> Text:
    """``3 findings: src_free_before_done ×2 (12), leak ×1 (4)`` — per check: findings (instances);
    then the checks that could not run and those that compared only part of their input."""
    if findings is None:
        return Text("running the checks…", style="italic")
    per = collections.OrderedDict()
    for f in findings:
        n, inst = per.get(f.check, (0, 0))
        per[f.check] = (n + 1, inst + f.count)
    t = Text()
    if not findings:
        t.append("no findings", "bold green")
    else:
        errs = sum(1 for f in findings if f.severity == "error")
        t.append(f"{len(findings)} finding{'s' * (len(findings) != 1)}", "bold red" if errs else "bold yellow")
        t.append(": " + ", ".join(f"{c} ×{n} ({i})" for c, (n, i) in per.items()))
    if skipped:   # which ones, then the first one's reason (check --format json has every reason)
        t.append(f"  [{len(skipped)} check{'s' * (len(skipped) != 1)} skipped: "
                 f"{', '.join(c for c, _ in skipped)} — {skipped[0][1]}]", "grey50")
    if partial:
        t.append(f"  [compared in part only: {', '.join(partial)} (see the notes)]", "grey50")
    return t


class FindingsPanel(Vertical):
    """Counts line and one table row per finding."""

    BINDINGS = [Binding("enter", "jump", "Jump to events")]

    class FindingChosen(Message):
        """The user asked to see a finding's events."""

        def __init__(self, finding):
            super().__init__()
            self.finding = finding

    def __init__(self, **kw):
        super().__init__(**kw)
        self.findings: list | None = None

    def compose(self):
        yield Static(counts_line(None, []), id="findings-counts")
        t = DataTable(id="findings-table", cursor_type="row", zebra_stripes=True)
        t.add_columns("sev", "check", "count", "request", "where")
        yield t
        yield Static("", id="findings-message")

    def show(self, findings: list, skipped: list, partial: list | None = None) -> None:
        """Fill the panel with analysis Finding objects."""
        self.findings = findings
        self.query_one("#findings-counts", Static).update(counts_line(findings, skipped, partial))
        t = self.query_one("#findings-table", DataTable)
        t.clear()
        for i, f in enumerate(findings):
            where = "/".join(str(x) for x in (f.agent, f.pool, f"L{f.layer}" if f.layer is not None else None,
                                              f"s{f.slot}" if f.slot is not None else None) if x)
            # request and agent names come from the trace: Text, never markup
            t.add_row(Text(f.severity, "bold red" if f.severity == "error" else "yellow"), Text(f.check),
                      str(f.count), Text(f.request or "-"), Text(where), key=str(i))
        self._describe(0)

    def _describe(self, i: int) -> None:
        msg = self.findings[i].message if self.findings and 0 <= i < len(self.findings) else ""
        who = self.findings[i].extra.get("attribution") if msg else None
        if who:   # who wrote the bytes its corrupted reads hold
            msg += "\nWho wrote these bytes: " + "\n  ".join(who[:3])
        self.query_one("#findings-message", Static).update(Text(msg))  # trace names: never markup

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._describe(event.cursor_row)

    def show_error(self, message: str) -> None:
        """The checks could not run: say why in place of the table."""
        self.query_one("#findings-counts", Static).update(Text(f"checks failed: {message}", style="bold red"))

    def action_jump(self) -> None:
        t = self.query_one("#findings-table", DataTable)
        if self.findings and 0 <= t.cursor_row < len(self.findings):
            self.post_message(self.FindingChosen(self.findings[t.cursor_row]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_jump()
