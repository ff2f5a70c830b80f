"""Pilot tests of the TUI: each panel, and the main flow on the early-free trace
(open → findings → jump → inspect the transfer → step through the slot's history)."""
import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.findings_panel import FindingsPanel
from kvtrace.tui.help import HelpScreen
from kvtrace.tui.inspector import TransferInspector
from kvtrace.tui.slotmap import SlotMap
from kvtrace.tui.source import TimelineSource

from tui_helpers import sync, wait_for


def make_app(path, **kw) -> KvtraceApp:
    return KvtraceApp(TimelineSource(TraceSession(path), background=True), **kw)   # as `kvtrace tui` opens it


@sync
async def test_main_flow_finds_the_early_free_and_walks_the_slot(early_free_trace):
    app = make_app(early_free_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        checks = {f.check for f in app.findings}
        assert "src_free_before_done" in checks
        # findings → jump: the table lists errors first; pick the early free
        await pilot.press("f")
        table = app.query_one("#findings-table")
        idx = next(i for i, f in enumerate(app.findings) if f.check == "src_free_before_done")
        table.move_cursor(row=idx)
        gen = app.panel_generation
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.panel_generation > gen)
        first = app.timeline.row
        assert (first["shard"], first["seq"]) == min(app.findings[idx].events, key=lambda e: app.source.ord_of(*e))
        # n walks the finding's events: the post, then the free
        kinds = [first["kind"]]
        await pilot.press("n")
        kinds.append(app.timeline.row["kind"])
        assert kinds == ["xfer_post", "free"]
        # inspect the transfer from its post
        await pilot.press("p")
        await wait_for(pilot, lambda: app.query_one(TransferInspector).view is not None
                       and app.timeline.row["kind"] == "xfer_post")
        await pilot.press("t")
        view = app.query_one(TransferInspector).view
        assert (view.shard, view.xfer, view.state.value) == ("prefill", 0, "in flight")
        # the slot map at the free's moment: slot 1 freed with bytes still leaving it
        await pilot.press("n", "s")
        await wait_for(pilot, lambda: app.query_one(SlotMap).cells and app.query_one(SlotMap).moment == f"@row {app.timeline.row['ord']}")
        smap = app.query_one(SlotMap)
        assert smap.pool == "kv" and smap.cells[1].xfer_out and smap.cells[1].hazard
        # choose slot 1: the timeline shows that slot's history; step through it
        smap.selected = 1
        await pilot.press("enter")
        assert app.source.filter.slot == 1 and app.timeline.has_focus
        seen = []
        await pilot.press("g")
        for _ in range(app.source.count):
            seen.append(app.timeline.row["kind"])
            await pilot.press("j")
        assert seen[:2] == ["alloc", "write"] and "xfer_post" in seen and seen.count("free") == 2
        await pilot.press("escape")
        assert app.source.filter.empty


@sync
async def test_clean_trace_has_no_findings_and_no_hazard(clean_trace):
    app = make_app(clean_trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        assert app.findings == []
        assert "no findings" in str(app.query_one("#findings-counts").render())
        await pilot.press("colon")
        await pilot.press(*"prefill:0", "enter")
        for _ in range(app.source.count - 1):
            await pilot.press("j")
        await wait_for(pilot, lambda: app.query_one(SlotMap).cells)
        assert not any(c.hazard for c in app.query_one(SlotMap).cells)


@sync
async def test_filter_bar_jump_bar_and_errors_inline(early_free_trace):
    app = make_app(early_free_trace, run_findings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("slash", *"kind=free", "enter")
        assert app.source.count == 3 and app.timeline.row["kind"] == "free"
        assert "filter: kind=free" in str(app.query_one("#status").render())
        await pilot.press("escape")
        assert app.source.count == app.source.total
        await pilot.press("slash", *"colour=red", "enter")
        assert app.source.filter.empty                     # bad filter leaves the view alone
        await pilot.press("escape", "colon", *"decode:5", "enter")
        assert (app.timeline.row["shard"], app.timeline.row["seq"]) == ("decode", 5)
        await pilot.press("G")
        assert app.timeline.cursor == app.source.count - 1


@sync
async def test_follow_modes_cycle_and_step(early_free_trace):
    app = make_app(early_free_trace, run_findings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("colon", *"prefill:2", "enter")       # prefill's req_start of r1
        assert app.timeline.row["request"] == "r1"
        await pilot.press("n")
        assert app.timeline.row["request"] == "r1"
        await pilot.press("colon", *"prefill:7", "enter", "m", "m")   # the post; follow transfer
        assert "transfer prefill#x0" in str(app.query_one("#status").render())
        await pilot.press("n")
        assert app.timeline.row["kind"] == "notif_recv"


@sync
async def test_sql_console_reads_and_refuses_writes(early_free_trace):
    app = make_app(early_free_trace, run_findings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        app.query_one("#sql-input").value = "select kind, count(*) n from tl group by 1 order by 1"
        await pilot.press("enter")
        table = app.query_one("#sql-result")
        assert table.row_count > 5 and "rows" in str(app.query_one("#sql-status").render())
        app.query_one("#sql-input").value = "drop view events"
        await pilot.press("enter")
        assert "read-only" in str(app.query_one("#sql-status").render())
        app.query_one("#sql-input").value = "select nope from tl"
        await pilot.press("enter")
        assert "error" in str(app.query_one("#sql-status").render())
        assert app.source.con.execute("select count(*) from events").fetchone()[0] == app.source.total


@sync
async def test_help_screen_and_palette_entries(clean_trace):
    app = make_app(clean_trace, run_findings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {"Findings", "Slot map", "Transfer inspector", "SQL console", "Filter the timeline"} <= set(titles)


@pytest.mark.parametrize("trace", ["early_free_trace"])
@sync
async def test_findings_panel_counts_per_check(trace, request):
    app = make_app(request.getfixturevalue(trace))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        text = str(app.query_one("#findings-counts").render())
        for f in app.findings:
            assert f.check in text
        assert app.query_one(FindingsPanel).query_one("#findings-table").row_count == len(app.findings)
