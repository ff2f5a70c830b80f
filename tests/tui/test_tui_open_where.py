"""Where the TUI opens: the inspector on the first mismatched descriptor (not the ok rows
above it), the slot map on the first finding's pool, the panel keys in the footer."""
import os
import shutil

from kvtrace.analysis.session import TraceSession
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.inspector import TransferInspector
from kvtrace.tui.slotmap import SlotMap
from kvtrace.tui.source import TimelineSource

from tui_helpers import sync, wait_for

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "traces")


def _copy(tmp_path, name):
    shutil.copytree(os.path.join(ROOT, name + ".kvtrace"), tmp_path / name, ignore=shutil.ignore_patterns("_index"))
    return str(tmp_path / name)


def _first_bad_post(app):
    """(ord of an xfer_post with ok descriptors before a mismatched one, its shard and xfer)."""
    from kvtrace.tui.inspector import desc_problem
    posts = app.source.con.execute("select ord, shard, xfer from tl where kind = 'xfer_post' order by ord").fetchall()
    for o, shard, xfer in posts:
        view = app.facts.transfer(shard, xfer, o)
        bad = [i for i, d in enumerate(view.descs) if desc_problem(d)]
        if bad and bad[0] >= 7:
            return o, shard, xfer
    return None


@sync
async def _inspector_opens_on_mismatch(path):
    app = KvtraceApp(TimelineSource(TraceSession(path)), run_findings=False)
    async with app.run_test(size=(100, 30)) as pilot:
        found = _first_bad_post(app)
        assert found is not None, "the uniform-slot-count trace has a posting with ok rows before a bad one"
        o, shard, xfer = found
        app.timeline.move_to_ord(o)
        insp = app.query_one(TransferInspector)
        # that posting's panel, not one still landing from the cursor's first row
        await wait_for(pilot, lambda: insp.view is not None and (insp.view.shard, insp.view.xfer) == (shard, xfer))
        await pilot.press("t")     # the inspector's tab was not shown yet: it scrolls once shown
        await wait_for(pilot, lambda: insp.scroll_y > 0)
        from kvtrace.tui.inspector import first_mismatch_line, render_transfer
        line = first_mismatch_line(render_transfer(insp.view), insp.view, insp.content_size.width)
        assert line > insp.size.height                     # it would start below the fold ...
        assert 0 <= line - insp.scroll_y < insp.size.height   # ... and is in view: the ok rows are scrolled past


def test_inspector_opens_on_the_first_mismatched_descriptor(tmp_path):
    _inspector_opens_on_mismatch(_copy(tmp_path, "engine-uniform-slot-count"))


@sync
async def _slot_map_pool(path):
    app = KvtraceApp(TimelineSource(TraceSession(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.findings is not None)
        first = next(f for f in app.findings if f.agent and f.pool)
        smap = app.query_one(SlotMap)
        await wait_for(pilot, lambda: (smap.agent, smap.pool) == (first.agent, first.pool))
        footer = " ".join(str(b.description) for b in app.BINDINGS if getattr(b, "show", True))
        assert all(k in footer for k in ("Findings", "Transfer", "Slots", "SQL"))
        return first.pool


def test_slot_map_opens_on_the_first_findings_pool(tmp_path):
    assert _slot_map_pool(_copy(tmp_path, "engine-uniform-slot-count")) == "index_k"
