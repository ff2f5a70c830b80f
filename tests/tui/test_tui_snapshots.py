"""SVG snapshots of the main screens at 80x24 (pytest-textual-snapshot; refresh with
``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` after a deliberate change and
look at the SVGs under __snapshots__/ before committing them)."""
import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.slotmap import SlotMap
from kvtrace.tui.source import TimelineSource
from tui_helpers import wait_for

pytestmark = pytest.mark.slow
pytest.importorskip("pytest_textual_snapshot")   # the snap_compare fixture (test extra)


def app_for(path) -> KvtraceApp:
    return KvtraceApp(TimelineSource(TraceSession(path)))


async def settled(pilot, *keys) -> None:
    """Findings loaded, the keys pressed, and the side panels refreshed after them."""
    app = pilot.app
    await wait_for(pilot, lambda: app.findings is not None and app.panel_generation > 0)
    for k in keys:
        gen = app.panel_generation
        await pilot.press(k)
        if k in ("enter", "n", "p", "j", "k"):
            await wait_for(pilot, lambda: app.panel_generation > gen)


def test_findings_screen(snap_compare, early_free_trace):
    assert snap_compare(app_for(early_free_trace), run_before=lambda p: settled(p))


def test_transfer_inspector_after_jump(snap_compare, early_free_trace):
    async def go(pilot):
        await settled(pilot, "f", "down", "enter")     # the src_free_before_done finding
        await settled(pilot, "t")
    assert snap_compare(app_for(early_free_trace), run_before=go)


def test_slot_map_at_the_early_free(snap_compare, early_free_trace):
    async def go(pilot):
        await settled(pilot, "f", "down", "enter", "n", "s")
        await wait_for(pilot, lambda: pilot.app.query_one(SlotMap).cells)
    assert snap_compare(app_for(early_free_trace), run_before=go)


def test_help_screen(snap_compare, clean_trace):
    assert snap_compare(app_for(clean_trace), run_before=lambda p: settled(p, "question_mark"))
