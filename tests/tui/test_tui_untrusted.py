"""Hostile names in the TUI's panels, SQL in its filter text, and its SQL console
sandboxed (the trace of tests/test_untrusted.py)."""
from kvtrace.analysis.session import TraceSession
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.source import TimelineSource

from test_untrusted import HOSTILE_REQ, build_hostile
from tui_helpers import sync, wait_for


def test_tui_panels_show_hostile_names_and_filter_sql_is_a_value(tmp_path):
    hostile = build_hostile(tmp_path / "h.kvtrace")
    session = TraceSession(hostile)
    source = TimelineSource(session, sandbox=True, background=True)   # as `kvtrace tui` opens it

    @sync
    async def drive():
        app = KvtraceApp(source)
        async with app.run_test(size=(120, 30)) as pilot:
            await wait_for(pilot, lambda: app.findings is not None)
            assert any(f.request == HOSTILE_REQ for f in app.findings)
            await pilot.press("f")
            await pilot.pause(0.05)
            assert "[bold red]" in str(app.query_one("#findings-message").render()) or \
                any(f.request == HOSTILE_REQ for f in app.findings)
            total = app.source.total
            # SQL in the filter text is a value to look for, not SQL to run
            for text in ["' OR 1=1 --", "x') OR TRUE OR ('", "request=' OR '1'='1"]:
                await pilot.press("escape", "slash", *text, "enter")
                # refused inline (unbalanced quotes) or matched as text: never every row
                assert app.source.filter.empty or app.source.count < total
            await pilot.press("escape", "slash", *"request=r2", "enter")
            assert 0 < app.source.count < total                  # the twin: a plain filter works
            # the SQL console reads the trace, not the machine
            await pilot.press("escape", "e")
            app.query_one("#sql-input").value = "select * from read_csv('/etc/passwd')"
            await pilot.press("enter")
            assert "error" in str(app.query_one("#sql-status").render())
    drive()
    session.close()
