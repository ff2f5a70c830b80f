"""n/p land where a plain query of the timeline says, in every follow mode (request,
slot, transfer) and both directions, from the posting lists (kvtrace/model/follow_index.py)
and from DuckDB while those are not built yet; at the end of a request, n rings the bell
and stays; lists made from another timeline are rebuilt, not misread."""
import json
import os
import pathlib
import shutil

import duckdb
import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.model import follow_index
from kvtrace.tui import app as app_mod
from kvtrace.tui.app import KvtraceApp
from kvtrace.tui.filters import parse_filter
from kvtrace.tui.follow import Follow, follow_predicate
from kvtrace.tui.source import TimelineSource

from tui_helpers import sync, wait_for

HERE = pathlib.Path(__file__).resolve().parent
TRACES = HERE.parents[1] / "traces"
REFERENCE = (HERE / "follow_reference.sql").read_text()
PARAMS = {"request": ("request",), "slot": ("agent", "pool", "slot"), "xfer": ("xshard", "xfer")}


def copy(name, tmp_path) -> str:
    dst = tmp_path / name
    shutil.copytree(TRACES / (name + ".kvtrace"), dst, ignore=shutil.ignore_patterns("_index"))
    return str(dst)


def hits(src, con, kind, key) -> list[int]:
    """The ords of the events naming ``key`` that the filter keeps (the reference query)."""
    p = {n: None for names in PARAMS.values() for n in names}
    p.update(zip(PARAMS[kind], key))
    visible = None if src._ords is None else [int(o) for o in src._ords]
    return [r[0] for r in con.execute(REFERENCE, dict(p, kind=kind, visible=visible)).fetchall()]


def follows(src):
    """Every (kind, key) n/p can follow from some row: each slot of a row counts (the
    slot map picks any of them)."""
    keys = set()
    for i in range(src.total):
        row = src.reader.rows(i, i + 1)[0]
        for mode in (Follow.REQUEST, Follow.XFER):
            fp = follow_predicate(mode, row)
            if fp:
                keys.add(fp[0])
        if row["agent"] is not None and row["pool"] is not None:
            for s in row["slots"] or []:
                keys.add(follow_predicate(Follow.SLOT, row, (row["agent"], row["pool"], s))[0])
    return sorted(keys, key=repr)


def check_all(src, con, per_kind: int | None = None) -> int:
    """find from every key's events, their neighbours, both ends and every 5th row, both
    directions, against the nearest reference hit; returns how many steps landed on an
    event (so the test shows it compared real steps). ``per_kind``: only that many keys
    of each kind, from the key's own events and both ends."""
    landed = 0
    seen: dict[str, int] = {}
    for kind, key in follows(src):
        seen[kind] = seen.get(kind, 0) + 1
        if per_kind is not None and seen[kind] > per_kind:
            continue
        want = hits(src, con, kind, key)
        afters = {-1, src.total} | (set(range(0, src.total, 5)) if per_kind is None else set())
        for o in want:
            afters |= {o - 1, o, o + 1}
        for after in sorted(afters):
            nxt = next((o for o in want if o > after), None)
            prv = next((o for o in reversed(want) if o < after), None)
            assert src.find((kind, key), after, True) == nxt, (kind, key, after, "n")
            assert src.find((kind, key), after, False) == prv, (kind, key, after, "p")
            landed += (nxt is not None) + (prv is not None)
    return landed


@pytest.mark.parametrize("name", ["engine-clean", "engine-early-src-free"])
def test_follow_matches_a_plain_query_in_every_mode(tmp_path, name):
    src = TimelineSource(TraceSession(copy(name, tmp_path)))
    assert follow_index.is_current(os.path.dirname(src.events_path))
    con = duckdb.connect()
    con.read_parquet(src.events_path).create_view("tl")
    kinds = {k for k, _ in follows(src)}
    assert kinds == {"request", "slot", "xfer"}
    assert check_all(src, con) > 0
    # under a filter only the rows it keeps count
    src.set_filter(parse_filter("kind=free,xfer_post,notif_recv,read"))
    assert 0 < src.count < src.total
    assert check_all(src, con) > 0
    # before the lists are built n/p ask DuckDB: the same answers
    src.set_filter(parse_filter(""))
    src._follow_ready.clear()
    assert check_all(src, con, per_kind=4) > 0


@sync
async def test_next_at_the_end_of_a_request_rings_the_bell_and_stays(tmp_path):
    class App(KvtraceApp):   # counts the bell the real app rings
        CSS_PATH = str(pathlib.Path(app_mod.__file__).with_name(KvtraceApp.CSS_PATH))
        bells = 0

        def bell(self):
            App.bells += 1
            super().bell()

    src = TimelineSource(TraceSession(copy("engine-clean", tmp_path)), background=True)
    app = App(src, run_findings=False)
    async with app.run_test(size=(80, 24)) as pilot:
        tl = app.timeline
        req = next(src.row(i)["request"] for i in range(src.count) if src.row(i)["request"])
        last = max(i for i in range(src.count) if src.row(i)["request"] == req)
        first = min(i for i in range(src.count) if src.row(i)["request"] == req)
        tl.move_to(last)
        await pilot.press("n")
        assert tl.cursor == last and App.bells == 1         # no later event of the request
        await pilot.press("p")
        assert tl.cursor < last and tl.row["request"] == req and App.bells == 1
        tl.move_to(first)
        await pilot.press("p")
        assert tl.cursor == first and App.bells == 2        # none earlier either
        await pilot.press("n")
        assert tl.cursor > first and tl.row["request"] == req
        await wait_for(pilot, lambda: src.ready)


def test_lists_of_another_timeline_are_rebuilt_not_misread(tmp_path):
    path = copy("engine-early-src-free", tmp_path)
    src = TimelineSource(TraceSession(path))
    d = os.path.dirname(src.events_path)
    row = next(src.row(i) for i in range(src.count) if src.row(i)["request"])
    fp = follow_predicate(Follow.REQUEST, row)[0]
    want = src.find(fp, row["ord"])
    assert want is not None
    # made from another timeline (or by code before the lists existed: no stamp): the
    # lists on disk are wrong for this one
    with open(os.path.join(d, follow_index.STAMP)) as f:
        stamp = json.load(f)
    stamp["timeline"] = {"timeline_version": -1}
    with open(os.path.join(d, follow_index.STAMP), "w") as f:
        json.dump(stamp, f)
    ords = os.path.join(d, "follow_request.ords.npy")
    with open(ords, "r+b") as f:     # and their content wrong: reading them would land elsewhere
        f.seek(-4, os.SEEK_END)
        f.write(b"\xff\xff\xff\x7f")
    assert not follow_index.is_current(d)
    again = TimelineSource(TraceSession(path))
    assert follow_index.is_current(d)
    assert again.find(fp, row["ord"]) == want
    os.remove(os.path.join(d, follow_index.STAMP))                # the old code wrote none
    assert not follow_index.is_current(d)
    assert TimelineSource(TraceSession(path)).find(fp, row["ord"]) == want


def test_key_order_is_the_stable_lexicographic_one_packed_or_not():
    import numpy as np

    rng = np.random.default_rng(3)
    n = 5000
    codes = rng.integers(0, 40, n).astype(np.int32)
    narrow = rng.integers(-70_000, 70_000, n)                    # packs: a radix sort on 16-bit digits
    wide = rng.choice(np.array([-2**62, 0, 5, 2**62]), n)       # does not: a lexsort
    for parts, sizes in (([codes], [40]), ([codes, narrow], [40, None]), ([codes, wide], [40, None])):
        got = follow_index._order(parts, sizes)
        assert np.array_equal(got, np.lexsort(tuple(reversed(parts))))   # lexsort is stable
