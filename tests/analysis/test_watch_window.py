"""kvtrace watch --window (issue 20): past the window, a re-check holds only the recent
events plus what they still refer to, and still reports what `check` finds on the whole
trace. Clocks injected: the recorders' timestamps and the watcher's now are one fake
monotonic clock; no sleeps, no timed assertions."""
from __future__ import annotations

import pytest

from kvtrace.analysis.live_session import LiveCheck
from kvtrace.analysis.session import TraceSession
from kvtrace.analysis.watch import Watcher, identity
from kvtrace.tracer.recorder import Recorder

S = 1_000_000_000


def _follow(path, bug: bool, window_s: float | None):
    """Decode allocates slot 1 for r1 at 1 s and holds it; short requests come and go every
    second until 30 s; at 30 s r3 takes slot 1: without r1's free first (``bug``), a
    double alloc whose first half is 29 s older than the window. Returns (reported
    findings, the watcher's window)."""
    now = [0]
    w = Watcher(path, lambda: now[0] / S,
                check=LiveCheck(now_ns=lambda: now[0], window_s=window_s, window_slack_s=1.0, workers=1))
    dec = Recorder(path, "decode", flush_interval=0.2)
    pre = Recorder(path, "prefill", flush_interval=0.2)
    reported = []
    try:
        dec.event("alloc", "decode", "r1", pool="kv", slots=[1], t_ns=S)
        for i in range(2, 30, 2):
            t = i * S
            dec.event("alloc", "decode", f"s{i}", pool="kv", slots=[10 + i % 3], t_ns=t)
            dec.event("free", "decode", f"s{i}", pool="kv", slots=[10 + i % 3], t_ns=t + S // 2)
            dec.flush()
            pre.event("mark", None, detail={"text": f"tick {i}"}, t_ns=t + S // 2)
            pre.flush()
            now[0] = t + S
            reported += [r.finding for r in w.poll()]
        if not bug:
            dec.event("free", "decode", "r1", pool="kv", slots=[1], t_ns=30 * S)
        dec.event("alloc", "decode", "r3", pool="kv", slots=[1], t_ns=30 * S + 1)
        dec.event("free", "decode", "r3", pool="kv", slots=[1], t_ns=30 * S + 2)
        dec.flush()
        pre.event("mark", None, detail={"text": "last"}, t_ns=30 * S + 3)
        pre.flush()
        for k in range(1, 4):
            now[0] = 30 * S + k * S
            reported += [r.finding for r in w.poll()]
        dec.close()
        pre.close()
        now[0] = 40 * S
        reported += [r.finding for r in w.poll()]    # the finished trace: findings that need its end
        window = w.check.session.window
        return reported, window
    finally:
        w.close()
        dec.close()
        pre.close()


@pytest.mark.parametrize("bug", [True, False], ids=["double-alloc-of-a-slot-held-29s", "clean-twin"])
def test_window_keeps_the_alloc_of_a_slot_still_held(tmp_path, bug):
    path = str(tmp_path / "live.kvtrace")
    reported, window = _follow(path, bug, window_s=5.0)
    assert window.evictions > 0 and window.evicted_events > 0     # the window did move
    with TraceSession(path) as s:
        whole = s.findings()
    assert sorted(f.check for f in reported) == (["double_alloc", "request_waiting"] if bug else [])
    assert {identity(f) for f in reported} == {identity(f) for f in whole}


def test_window_rebuilds_hold_only_the_recent_past_and_what_it_refers_to(tmp_path):
    path = str(tmp_path / "live.kvtrace")
    now = [0]
    check = LiveCheck(now_ns=lambda: now[0], window_s=5.0, window_slack_s=1.0, workers=1)
    w = Watcher(path, lambda: now[0] / S, check=check)
    dec = Recorder(path, "decode", flush_interval=0.2)
    try:
        dec.event("alloc", "decode", "held", pool="kv", slots=[1], t_ns=S)
        for i in range(2, 20):
            dec.event("alloc", "decode", f"s{i}", pool="kv", slots=[2], t_ns=i * S)
            dec.event("free", "decode", f"s{i}", pool="kv", slots=[2], t_ns=i * S + S // 2)
            dec.flush()
            now[0] = i * S + S
            w.poll()
        con = check.session.con
        requests = {r for (r,) in con.execute("SELECT DISTINCT request FROM live_events").fetchall()}
        assert "held" in requests                         # its slot is still held: kept
        assert "s2" not in requests and "s19" in requests  # long done: left behind; recent: kept
        oldest = con.execute("SELECT min(t_ns) FROM live_events WHERE request <> 'held'").fetchone()[0]
        assert oldest >= now[0] - int(7.5 * S) - 2 * S    # at most 1.5 windows and the slack behind now
    finally:
        w.close()
        dec.close()


@pytest.mark.slow
@pytest.mark.parametrize("inject", ["early-src-free", None], ids=["bug-late", "clean-twin"])
def test_window_on_a_long_live_recording_ends_with_what_check_finds(tmp_path, inject):
    """The reference engine records for many 1 s windows while a Watcher follows it with
    the window on (real clocks; only the result is asserted): the window moved, and what
    watch reported is what `check` finds on the finished trace."""
    from live_recording import record_and_follow
    # a 1 s window (below the CLI's 5 s least): it moves many times on any machine, and a
    # re-check slower than the window must still leave nothing unchecked behind
    out, reported, window = record_and_follow(tmp_path, 2400, inject, after=2000, check=LiveCheck(window_s=1.0))
    assert window is not None and window.evictions > 0 and window.evicted_events > 0, "shorter than the window"
    with TraceSession(out) as s:
        final = s.findings()
    assert {identity(f) for f in reported} == {identity(f) for f in final}
    assert bool(final) == bool(inject)


def _rows(table: str, **cols):
    import pyarrow as pa

    from kvtrace.tracer.schema import SCHEMAS
    n = len(next(iter(cols.values())))
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * n), f.type) for f in SCHEMAS[table]})


def test_window_keeps_descriptor_rows_loaded_before_their_posting():
    """A posting's descriptor rows land in one load, its xfer_post in a later one (the
    descriptors stream was read after a flush, the events stream before it): the window
    holds them until the posting arrives and keeps them with it, and a window moved in
    between still hands them back (no row lost)."""
    from kvtrace.model.live_window import LiveWindow
    w = LiveWindow(5.0, slack_s=1.0)
    descs = _rows("descs", xfer=[7, 7], pos=[0, 1], op=["WRITE", "WRITE"], nbytes=[64, 64])
    first = _rows("events", seq=[0, 1], t_ns=[S, S + 1], kind=["req_start", "alloc"], request=["r1", "r1"],
                  agent=["prefill", "prefill"], pool=[None, "kv"], slots=[None, [3]])
    w.feed("prefill", {"events": first, "descs": descs})
    assert sum(b.num_rows for b in w.waiting("prefill")) == 2      # no posting yet: held aside
    kept = w.advance(3 * S)
    assert sum(b.num_rows for b in kept["prefill"]["descs"]) == 0 and w.waiting("prefill")
    post = _rows("events", seq=[2, 3], t_ns=[4 * S, 4 * S + 1], kind=["xfer_post", "xfer_done"],
                 request=["r1", "r1"], agent=["prefill", "prefill"], xfer=[7, 7])
    w.feed("prefill", {"events": post})
    assert w.waiting("prefill") == []
    kept = w.advance(20 * S)                  # r1 holds slot 3: everything of it is kept
    assert sum(b.num_rows for b in kept["prefill"]["descs"]) == 2
    assert sorted(s for b in kept["prefill"]["events"] for s in b.column("seq").to_pylist()) == [0, 1, 2, 3]


def _kept_requests(kept, shard):
    return {r for b in kept[shard]["events"] for r in b.column("request").to_pylist() if r is not None}


def test_window_keeps_a_request_on_every_shard_or_on_none():
    """Decode shares slot 1 between a and b (a prefix page); prefill never sees them share,
    and b stays open there. a is done everywhere, yet decode keeps it with b: so must
    prefill, or a's reads on decode would have no transfer behind them (a false
    read_undelivered). Later both let go of them together."""
    from kvtrace.model.live_window import LiveWindow
    w = LiveWindow(5.0, slack_s=1.0)
    ms = S // 100
    dec = _rows("events", seq=list(range(8)), t_ns=[S + i * ms for i in range(8)],
                kind=["req_start", "alloc", "req_start", "alloc", "free", "free", "req_done", "req_done"],
                request=["a", "a", "b", "b", "a", "b", "a", "b"], agent=["decode"] * 8,
                pool=[None, "kv", None, "kv", "kv", "kv", None, None],
                slots=[None, [1], None, [1], [1], [1], None, None])
    pre = _rows("events", seq=[0, 1, 2], t_ns=[S, S + ms, S + 5 * ms], kind=["req_start", "req_start", "req_done"],
                request=["a", "b", "a"], agent=["prefill"] * 3)
    w.feed("decode", {"events": dec})
    w.feed("prefill", {"events": pre})
    kept = w.advance(9 * S)
    assert _kept_requests(kept, "decode") == {"a", "b"} == _kept_requests(kept, "prefill")
    w.feed("prefill", {"events": _rows("events", seq=[3], t_ns=[9 * S + S // 2], kind=["req_done"], request=["b"],
                                       agent=["prefill"])})
    for now in (20 * S, 40 * S):
        kept = w.advance(now)
        assert _kept_requests(kept, "decode") == _kept_requests(kept, "prefill")
    assert _kept_requests(kept, "decode") == set()


def _replay(path: str, window_s: float, slack_s: float, step_s: float):
    """Feed a finished trace's rows to a LiveWindow as a watcher would load them while it
    was written (every ``step_s`` of its clock, each shard's events up to then, a
    posting's descriptor rows with or just before it); yield (now, what the window keeps,
    which requests each shard had loaded) at every move."""
    import numpy as np
    import pyarrow.compute as pc

    from kvtrace.model.live_window import LiveWindow
    from kvtrace.tracer.reader import open_trace
    trace = open_trace(path)
    w = LiveWindow(window_s, slack_s)
    tabs = {s.name: {t: s.streams[t].table for t in ("events", "descs", "dlists", "layouts")} for s in trace.shards}
    t0 = min(pc.min(tb["events"]["t_ns"]).as_py() for tb in tabs.values())
    t1 = max(pc.max(tb["events"]["t_ns"]).as_py() for tb in tabs.values())
    loaded = {(s, t): 0 for s in tabs for t in ("events", "descs", "dlists", "layouts")}
    now = t0
    while now < t1 + int(2 * window_s * S):
        now += int(step_s * S)
        if w.due(now):
            seen = {s: set(tb["events"]["request"].slice(0, loaded[(s, "events")]).to_pylist()) - {None}
                    for s, tb in tabs.items()}
            yield now, w.advance(now), seen
        for s, tb in tabs.items():
            ts = np.maximum.accumulate(tb["events"]["t_ns"].to_numpy())
            n = int(np.searchsorted(ts, now, side="right"))
            # descriptor rows: up to those of the postings loaded by the next step (some early)
            nxt = int(np.searchsorted(ts, now + int(step_s * S), side="right"))
            posted = set(tb["events"]["xfer"].slice(0, nxt).to_pylist()) - {None}
            xs = tb["descs"]["xfer"].to_pylist()
            d = loaded[(s, "descs")]
            while d < len(xs) and xs[d] in posted:
                d += 1
            upto = {"events": n, "descs": d, "dlists": len(tb["dlists"]), "layouts": len(tb["layouts"])}
            gained = {t: tb[t].slice(loaded[(s, t)], upto[t] - loaded[(s, t)])
                      for t in upto if upto[t] > loaded[(s, t)]}
            for t in gained:
                loaded[(s, t)] = upto[t]
            if gained:
                w.feed(s, gained)


@pytest.mark.parametrize("trace", ["engine-early-src-free", "engine-abort-free-inflight", "engine-notify-first-handle"])
def test_window_over_recorded_traces_keeps_requests_whole_and_postings_with_their_descriptors(trace):
    """Replayed through a window a tenth of their length: at every move, a request both
    shards had loaded is kept by both or by neither, and every kept posting keeps its
    descriptor rows (else the checks see reads with no transfer behind them, or a posting
    whose descriptors look lost)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    moves = 0
    for now, kept, seen in _replay(f"traces/{trace}.kvtrace", window_s=0.25, slack_s=0.05, step_s=0.03):
        moves += 1
        reqs = {s: _kept_requests(kept, s) for s in kept}
        both = set.intersection(*seen.values())
        for r in both:
            assert len({r in reqs[s] for s in kept}) == 1, f"request {r} kept on one shard only at {now}"
        for s, tb in kept.items():
            if not tb["events"]:
                continue
            ev = pa.Table.from_batches(tb["events"])
            posts = set(pc.filter(ev["xfer"], pc.equal(ev["kind"], "xfer_post")).to_pylist())
            have = {x for b in tb["descs"] for x in b.column("xfer").to_pylist()}
            assert posts <= have, f"{s}: postings kept without their descriptors at {now}"
    assert moves >= 5
