"""Who wrote these bytes in the TUI: the findings panel's description and the transfer
inspector name the write whose bytes a corrupted read holds; a clean trace shows none."""
from __future__ import annotations

from rich.console import Console

from kvtrace.analysis.session import TraceSession
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.inspector import render_transfer
from kvtrace.tui.source import TimelineSource

from tui_helpers import sync, wait_for


def _text(renderable) -> str:
    con = Console(width=200, record=True)
    con.print(renderable)
    return con.export_text()


@sync
async def test_findings_panel_and_inspector_name_the_writer(early_free_trace):
    app = KvtraceApp(TimelineSource(TraceSession(early_free_trace)))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        panel = app.query_one("#findings-message")
        idx = next(i for i, f in enumerate(app.findings) if f.check == "src_free_before_done")
        app.query_one("FindingsPanel")._describe(idx)
        text = str(panel.render())
        assert "Who wrote these bytes" in text and "request r2's kv" in text
        # r1's own transfer carried r2's bytes: its inspector says so
        assert list(app.carried) == [("prefill", 0)]
        view = app.facts.transfer("prefill", 0, app.source.count - 1)
        body = _text(render_transfer(view, app.carried[("prefill", 0)]))
        assert "got their bytes through this transfer" in body and "written at prefill:" in body


@sync
async def test_clean_trace_attributes_nothing(clean_trace):
    app = KvtraceApp(TimelineSource(TraceSession(clean_trace)))
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        assert app.carried == {}
