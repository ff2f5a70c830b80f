"""Replay reads program order and descriptor ends from the trace model: its threads are
the model's prog_order, and a grouped descriptor spanning a run of slots moves into one
slot cell per slot of the run (the model's slot_pieces), on the clean twin and the bug."""
from __future__ import annotations

import pytest

from kvtrace.model import TraceModel
from kvtrace.replay.graph import load

from analysis_cases import CASES


@pytest.mark.parametrize("bug", [False, True], ids=["clean", "bug"])
def test_threads_and_run_ends_come_from_the_model(tmp_path, bug):
    path = str(tmp_path / "t.kvtrace")
    CASES["coalesced_early_free"](path, bug=bug)
    g = load(path)
    with TraceModel(path) as m:
        m.derive(["prog_order", "desc_end"])
        order = m.ask("thread_order").to_pylist()
        pieces = m.ask("slot_pieces").to_pylist()
    c = g.col
    assert sorted([(c["shard"][o], c["seq"][o]) for o in ops] for ops in g.threads) == \
        sorted([(r["shard"], q) for q in r["seqs"]] for r in order)
    # every end of a grouped descriptor lands in consecutive slots, as the model says
    runs = {}
    for r in pieces:
        runs.setdefault((r["shard"], r["xfer"], r["pos"], r["side"]), []).append((r["pool"], r["layer"], r["slot"], r["n"]))
    multi = {k: v for k, v in runs.items() if len(v) > 1}
    assert multi, "the scenario groups pages into one descriptor"
    moved = {}
    for mi, ti in enumerate(g.move_xfer):
        t = g.transfers[ti]
        for sc, _, dc, _, n in g.move_pieces[mi]:
            moved.setdefault((t.shard, t.xfer, "src"), []).append((g.mem.cells[sc], n))
            moved.setdefault((t.shard, t.xfer, "dst"), []).append((g.mem.cells[dc], n))
    for (sh, x, pos, side), want in multi.items():
        got = [(cell.pool, cell.layer, cell.slot) for cell, _ in moved[(sh, x, side)]]
        for pool, layer, slot, _ in want:
            assert (pool, layer, slot) in got
