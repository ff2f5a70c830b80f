"""The ring's liveness bookkeeping (RingStore._ingest_events, written as one inlined loop for
speed) gives the same state and the same dump as a straightforward per-row reference, on
random sequences of allocs, frees, transfers, registrations and request lifecycles; and
so does it when fed the Recorder's row tuples beside the batch (what RingRecorder does)."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys

import pyarrow as pa
import pytest
from hypothesis import example, given, settings, strategies as st

from kvtrace.tracer.ring_store import (Owners, RingStore, _REG_KINDS, _STATE_KIND_SET, _XFER_KINDS)
from kvtrace.tracer.schema import EVENTS



class _Reference(RingStore):
    """The bookkeeping as first written: one method call per row and per slot."""

    def _ingest_events(self, batch, rows=None):   # reads the batch only
        own = Owners.encode(batch.column("request"))
        for i, r in enumerate(batch.to_pylist()):
            kind, req, xfer = r["kind"], r["request"], r["xfer"]
            if kind not in _STATE_KINDS:
                continue
            if req is not None:
                owner = req
            elif kind in _XFER_KINDS and xfer is not None:
                owner = ("xfer", xfer)
                own.set(i, owner)
            elif kind in _REG_KINDS:
                owner = ("region", r["agent"], r["addr"])
                own.set(i, owner)
            else:
                continue
            self._row(r, owner)
        own._pos = None
        for o, t in own.last_times(batch.column("t_ns")):
            if o is not None and t > self._last_t.get(o, -1):
                self._last_t[o] = t
        return own

    def _slot(self, key):
        """(founder, {holder: holds}) of a slot's generation, (None, {}) when free."""
        v = self._slots.get(key[:2], {}).get(key[2])
        if v is None:
            return None, {}
        return (v[0], dict(v[1])) if isinstance(v, list) else (v, {v: 1})

    def _store_slot(self, key, founder, held):
        """As RingStore keeps it: the founder alone while it alone holds it once (and the
        slot never had another holder or hold since), else [founder, holders]."""
        v = self._slots.get(key[:2], {}).get(key[2])
        single = held == {founder: 1} and (v is None or not isinstance(v, list))
        self._slots.setdefault(key[:2], {})[key[2]] = founder if single else [founder, held]

    def _row(self, r, owner):
        kind, t, xfer, slots = r["kind"], r["t_ns"], r["xfer"], r["slots"]
        if kind == "alloc" and slots:
            for s in slots:
                key = (r["agent"], r["pool"], s)
                founder, held = self._slot(key)
                if founder is None:              # from free: the owner founds a generation
                    founder = owner
                    self._ref(owner)
                elif owner != founder and owner not in held:
                    self._deps.setdefault(owner, set()).add(founder)   # joins one: depends on its founder
                    self._ref(owner)
                held[owner] = held.get(owner, 0) + 1
                self._store_slot(key, founder, held)
        elif kind == "free" and slots:
            for s in slots:
                key = (r["agent"], r["pool"], s)
                founder, held = self._slot(key)
                if held.get(owner):
                    held[owner] -= 1
                    if held[owner] <= 0:
                        del held[owner]
                        if owner != founder:
                            self._unref(owner, t)
                    if not held:
                        del self._slots[key[:2]][key[2]]
                        if not self._slots[key[:2]]:
                            del self._slots[key[:2]]
                        self._unref(founder, t)
                    else:
                        self._store_slot(key, founder, held)
        elif kind == "xfer_post":
            if xfer in self._inflight:
                self._unref(self._inflight.pop(xfer), t)
            self._inflight[xfer] = owner
            self._xfer_owner[xfer] = owner
            self._ref(owner)
        elif kind in ("xfer_done", "xfer_error", "xfer_release"):
            if xfer in self._inflight:
                self._unref(self._inflight.pop(xfer), t)
            if kind == "xfer_error" and self.on_error is not None:
                self.on_error({"seq": r["seq"], "agent": r["agent"], "request": r["request"], "xfer": xfer})
        elif kind == "req_start":
            self._open.add(owner)
        elif kind in ("req_done", "req_abort"):
            self._open.discard(owner)
        elif kind == "register":
            self._ref(owner)
        elif kind == "deregister" and self._refs.get(owner):
            self._unref(owner, t)


_STATE_KINDS = frozenset(_STATE_KIND_SET.to_pylist())
_KINDS = sorted(_STATE_KINDS | {"write", "read", "mark"})

_row = st.fixed_dictionaries({
    # allocs and frees weighted up, few owners and slots: generations get shared and ended
    "kind": st.sampled_from(["alloc"] * 4 + ["free"] * 4 + _KINDS),
    "request": st.sampled_from(["r1", "r2", "r1", "r2", "r3", None]),
    "agent": st.sampled_from(["prefill"] * 4 + ["decode"]),
    "pool": st.sampled_from(["kv"] * 4 + [None]),
    "slots": st.one_of(st.lists(st.integers(0, 3), min_size=1, max_size=4), st.none(), st.just([])),
    "xfer": st.one_of(st.none(), st.integers(0, 4)),
    "addr": st.one_of(st.none(), st.sampled_from([4096, 8192])),
})


def _batches(flushes, tuples=False):
    seq = t = 0
    out = []
    for rows in flushes:
        full = []
        for r in rows:
            seq += 1
            t += 1_000_000
            full.append(dict(r, seq=seq, t_ns=t))
        b = pa.RecordBatch.from_pylist(full, schema=EVENTS)
        if tuples:   # the Recorder's buffer rows (slots as tuples, as it keeps them)
            out.append((b, [tuple(tuple(r.get(c)) if c == "slots" and r.get(c) is not None else r.get(c)
                                  for c in EVENTS.names) for r in full]))
        else:
            out.append(b)
    return out


class _FromRows(RingStore):
    """Fed as RingRecorder feeds it: the batch and the row tuples it was built from."""

    def _ingest_events(self, batch, rows=None):
        assert rows is not None and len(rows) == batch.num_rows   # the row path is the one compared
        return super()._ingest_events(batch, rows)


def _state(store):
    return (store._open, store._refs, store._last_t, store._slots, store._inflight,
            store._xfer_owner, store._deps)


def _dump(store, start):
    tables, window = store.snapshot(start)
    return [b.to_pylist() for b in tables["events"]], window


_A = {"agent": "prefill", "pool": "kv", "xfer": None, "addr": None}


@settings(max_examples=300, deadline=None)
@example(flushes=[[dict(_A, kind="alloc", request="r1", slots=[1, 2]),     # one free ends two generations
                   dict(_A, kind="free", request="r1", slots=[2, 1])]], window_ns=None)
@given(st.lists(st.lists(_row, min_size=1, max_size=25), min_size=1, max_size=12),
       st.sampled_from([None, 6_000_000, 20_000_000]))
def test_inlined_bookkeeping_matches_reference(flushes, window_ns):
    _compare(flushes, window_ns)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(_row, min_size=1, max_size=25), min_size=1, max_size=6),
       st.sampled_from([None, 6_000_000]))
def test_bookkeeping_in_slices_matches_reference(flushes, window_ns):
    """The C loop called on slices of a flush's rows (so other threads can take the GIL
    between them) gives the same state, errors and dumps as one call."""
    from kvtrace.tracer import ring_store
    before = ring_store._BOOK_SLICE
    ring_store._BOOK_SLICE = 3
    try:
        _compare(flushes, window_ns)
    finally:
        ring_store._BOOK_SLICE = before


def _live_by_effective(store):
    """RingStore.live_requests as first written: from _effective(local=True) (it takes a
    shorter way when no dependencies were seen)."""
    eff = store._effective(local=True)
    return (sorted(o for o, v in eff.items() if isinstance(o, str) and v == float("inf")),
            {o: v for o, v in eff.items() if isinstance(o, str) and v != float("inf")})


def _compare(flushes, window_ns):
    errors = ([], [], [])
    stores = []
    for cls, err in zip((RingStore, _Reference, _FromRows), errors):
        s = cls(window_ns=window_ns or 10**15, slack_ns=3_000_000)
        s.on_error = err.append
        stores.append(s)
    for b, rows in _batches(flushes, tuples=True):
        for s in stores:
            s.add("events", b, rows if isinstance(s, _FromRows) else None)
            s.evict(b.column("t_ns")[-1].as_py())
        assert _state(stores[0]) == _state(stores[1]) == _state(stores[2])
        assert stores[0].live_requests() == _live_by_effective(stores[0])
    assert errors[0] == errors[1] == errors[2]
    for start in (0, 10_000_000, 30_000_000):
        assert _dump(stores[0], start) == _dump(stores[1], start) == _dump(stores[2], start)
    new_owners = [o for c in stores[0].chunks for o in c.owners.uniq]
    assert new_owners == [o for c in stores[1].chunks for o in c.owners.uniq]
    assert new_owners == [o for c in stores[2].chunks for o in c.owners.uniq]


def test_reference_sees_generations():
    """The comparison is not vacuous: a shared slot makes one request depend on another in
    every version."""
    rows = [{"kind": "alloc", "request": "r1", "agent": "a", "pool": "kv", "slots": [1, 2]},
            {"kind": "alloc", "request": "r2", "agent": "a", "pool": "kv", "slots": [2]},
            {"kind": "free", "request": "r1", "agent": "a", "pool": "kv", "slots": [1, 2]}]
    for cls in (RingStore, _Reference, _FromRows):
        s = cls(window_ns=10**15)
        b, tuples = _batches([rows], tuples=True)[0]
        s.add("events", b, tuples if cls is _FromRows else None)
        assert s._deps == {"r2": {"r1"}}     # r2 reads what r1 wrote to slot 2
        # r1 is referenced by the generation it started (slot 2, still held), r2 by its hold
        assert s._refs == {"r1": 1, "r2": 1} and s._slots == {("a", "kv"): {2: ["r1", {"r2": 1}]}}


def test_shards_keep_a_group_only_one_of_them_saw(tmp_path):
    """Decode's r1 and r2 shared slot 2 (a prefix page); prefill never saw them share it and
    has r2 open. Both rings, exchanging through the session directory as RingRecorder does
    (live.jsonl, with the dependencies each saw), keep r1 with r2: without decode's r2 -> r1 prefill
    let r1 go while decode kept it, and a dump held r1's reads with no transfer behind them."""
    from kvtrace.tracer import ring_dump
    S = 1_000_000_000
    dec_rows = [{"kind": "req_start", "request": "r1", "agent": "dec", "t_ns": S},
                {"kind": "alloc", "request": "r1", "agent": "dec", "pool": "kv", "slots": [1, 2], "t_ns": S + 1},
                {"kind": "req_start", "request": "r2", "agent": "dec", "t_ns": S + 2},
                {"kind": "alloc", "request": "r2", "agent": "dec", "pool": "kv", "slots": [2], "t_ns": S + 3},
                {"kind": "free", "request": "r1", "agent": "dec", "pool": "kv", "slots": [1, 2], "t_ns": S + 4},
                {"kind": "free", "request": "r2", "agent": "dec", "pool": "kv", "slots": [2], "t_ns": S + 5},
                {"kind": "req_done", "request": "r1", "agent": "dec", "t_ns": S + 6},
                {"kind": "req_done", "request": "r2", "agent": "dec", "t_ns": S + 7}]
    pre_rows = [{"kind": "req_start", "request": "r1", "agent": "pre", "t_ns": S},
                {"kind": "req_done", "request": "r1", "agent": "pre", "t_ns": S + 5},
                {"kind": "req_start", "request": "r2", "agent": "pre", "t_ns": S + 6}]
    later = [{"kind": "mark", "agent": "x", "t_ns": 20 * S}]
    session = str(tmp_path / "s.kvtrace")
    stores = {"decode": RingStore(window_ns=5 * S, slack_ns=S), "prefill": RingStore(window_ns=5 * S, slack_ns=S)}
    for name, rows in (("decode", dec_rows), ("prefill", pre_rows)):
        os.makedirs(os.path.join(ring_dump.staging_dir(session), name))
        for b in _batches([rows, later]):
            stores[name].add("events", b)
    caches = {n: {} for n in stores}
    pubs = {n: ring_dump.LivePublisher(session, n) for n in stores}
    for _ in range(2):          # each publishes, then reads the other's (two rounds: both have read both)
        for name, st in stores.items():
            live, last = st.live_requests()
            pubs[name].publish(live, last, None, st.depends(), lambda t: t)
        for name, st in stores.items():
            remote, r_last, _, depends = ring_dump.read_live(session, name, caches[name])
            st.set_remote(remote, r_last, 21 * S, depends)
    kept = {}
    for name, st in stores.items():
        st.evict(21 * S)
        batches, _ = st.snapshot(16 * S)
        kept[name] = {r for b in batches["events"] for r in b.column("request").to_pylist() if r is not None}
    assert kept["decode"] == {"r1", "r2"} == kept["prefill"]


def _first_second(S: int) -> dict:
    """Second 1 of the two-shard feeds below: decode allocs slot 1 for r and reads it; prefill
    posts r's transfer, sees it done and ends r."""
    return {"decode": [{"seq": 0, "t_ns": S, "kind": "req_start", "request": "r", "agent": "d"},
                       {"seq": 1, "t_ns": S + 1, "kind": "alloc", "request": "r", "agent": "d", "pool": "kv", "slots": [1]},
                       {"seq": 2, "t_ns": S + 3, "kind": "read", "request": "r", "agent": "d", "pool": "kv", "slots": [1]}],
            "prefill": [{"seq": 0, "t_ns": S, "kind": "req_start", "request": "r", "agent": "p"},
                        {"seq": 1, "t_ns": S + 1, "kind": "xfer_post", "request": "r", "agent": "p", "xfer": 1},
                        {"seq": 2, "t_ns": S + 2, "kind": "xfer_done", "request": "r", "agent": "p", "xfer": 1},
                        {"seq": 3, "t_ns": S + 4, "kind": "req_done", "request": "r", "agent": "p"}]}


def test_a_quiet_shard_keeps_what_the_others_window_holds():
    """A 10 s ring. Prefill sends r at 1 s and records its last event at 4.9 s; decode
    holds r until 12 s (a long generation). Flushing and evicting every second, prefill
    evicts its last chunk at 15 s with nothing younger left; it must still hold r for a
    trigger then, whose window starts at 5 s on every shard: decode's window holds r's
    free at 12 s (and r's reads, pinned), so a dump without prefill's half of r has reads
    with no transfer behind them."""
    from kvtrace.tracer.schema import EVENTS as _EV
    S = 1_000_000_000

    def batch(rows):
        return pa.RecordBatch.from_pylist(rows, schema=_EV)
    stores = {n: RingStore(window_ns=10 * S, slack_ns=S) for n in ("decode", "prefill")}
    feed = {
        1: _first_second(S),
        4: {"prefill": [{"seq": 4, "t_ns": 4 * S + 9 * S // 10, "kind": "mark", "agent": "p"}]},   # its last event
        12: {"decode": [{"seq": 3, "t_ns": 12 * S, "kind": "free", "request": "r", "agent": "d", "pool": "kv", "slots": [1]},
                        {"seq": 4, "t_ns": 12 * S + 1, "kind": "req_done", "request": "r", "agent": "d"}]},
    }
    for sec in range(1, 16):
        for name, rows in feed.get(sec, {}).items():
            stores[name].add("events", batch(rows))
        now = sec * S + S // 2
        views = {n: st.live_requests() for n, st in stores.items()}
        for n, st in stores.items():
            (o_live, o_last), = [v for m, v in views.items() if m != n]
            st.set_remote(o_live, o_last, now)
        for st in stores.values():
            st.evict(now)
    kept = {}
    for n, st in stores.items():
        batches, _ = st.snapshot(5 * S)
        kept[n] = {r for b in batches["events"] for r in b.column("request").to_pylist() if r is not None}
    assert kept["decode"] == {"r"} == kept["prefill"]


def test_a_page_every_request_shares_keeps_its_filler_not_every_reader():
    """A system prompt's page (slot 7), filled by r0 and shared by every later request while
    earlier ones still hold it: its generation never ends. Each reader depends on r0 alone
    (one link each, not one per pair: 20,000 holders of one slot took 6.5 GB before), and
    once the readers are done and past the slack only r0 (the page's filler) and the
    readers still live are kept -- not every request that ever read the page (before, one
    such page kept all of them: the pinned rows grew with the run's length)."""
    S = 1_000_000_000
    n = 400
    rows = [{"kind": "req_start", "request": "r0", "agent": "a"},
            {"kind": "alloc", "request": "r0", "agent": "a", "pool": "kv", "slots": [7]},
            {"kind": "write", "request": "r0", "agent": "a", "pool": "kv", "slots": [7]},
            {"kind": "free", "request": "r0", "agent": "a", "pool": "kv", "slots": [7]}]
    rows[3:3] = [{"kind": "alloc", "request": "r1", "agent": "a", "pool": "kv", "slots": [7]}]
    for i in range(2, n):   # r(i) takes the page, then r(i-1) lets it go: always held
        rows += [{"kind": "alloc", "request": f"r{i}", "agent": "a", "pool": "kv", "slots": [7]},
                 {"kind": "read", "request": f"r{i}", "agent": "a", "pool": "kv", "slots": [7]},
                 {"kind": "free", "request": f"r{i - 1}", "agent": "a", "pool": "kv", "slots": [7]}]
    s = RingStore(window_ns=2 * S, slack_ns=S)
    (b,) = _batches([rows])          # at 1 ms apart: all within 1.2 s
    s.add("events", b)
    assert sum(len(v) for v in s._deps.values()) == n - 1 and s._deps[f"r{n - 1}"] == {"r0"}
    assert s._refs == {"r0": 1, f"r{n - 1}": 1}
    t_end = 20 * S                   # a later event: everything before is past the window
    s.add("events", pa.RecordBatch.from_pylist([{"seq": 10**6, "t_ns": t_end, "kind": "mark", "agent": "x"}],
                                               schema=EVENTS))
    s.evict(t_end)
    batches, _ = s.snapshot(t_end - S)
    kept = {r for bb in batches["events"] for r in bb.column("request").to_pylist() if r is not None}
    assert kept == {"r0", f"r{n - 1}"}
    assert s.depends() == [[f"r{n - 1}", "r0"]]


def _exchange_run(tmp_path, decode_done_s: int):
    """Prefill sends r at 1 s and is done with it at once; decode holds r until
    ``decode_done_s`` (a long generation). A 4 s ring, slack 1 s; each second each shard
    publishes its live requests through its live.jsonl (ring_dump.LivePublisher: nothing
    is written while nothing changed) and reads the other's, then evicts. Returns the
    requests each shard's window at 14 s holds, and how many lines decode wrote."""
    from kvtrace.tracer import ring_dump
    from kvtrace.tracer.schema import EVENTS as _EV
    S = 1_000_000_000

    def batch(rows):
        return pa.RecordBatch.from_pylist(rows, schema=_EV)
    session = str(tmp_path / "s.kvtrace")
    stores = {n: RingStore(window_ns=4 * S, slack_ns=S) for n in ("decode", "prefill")}
    pubs = {n: ring_dump.LivePublisher(session, n) for n in stores}
    caches = {n: {} for n in stores}
    for n in stores:
        os.makedirs(os.path.join(ring_dump.staging_dir(session), n))
    feed = {
        1: _first_second(S),
        decode_done_s: {"decode": [
            {"seq": 3, "t_ns": decode_done_s * S, "kind": "free", "request": "r", "agent": "d", "pool": "kv", "slots": [1]},
            {"seq": 4, "t_ns": decode_done_s * S + 1, "kind": "req_done", "request": "r", "agent": "d"}]},
    }
    seq = 4
    for sec in range(1, 15):
        for name in stores:     # prefill records every second (a mark: its other work), decode only r
            rows = feed.get(sec, {}).get(name)
            if rows is None and name == "prefill":
                rows, seq = [{"seq": seq, "t_ns": sec * S, "kind": "mark", "agent": "p"}], seq + 1
            if rows:
                stores[name].add("events", batch(rows))
        now = sec * S + S // 2
        for name, st in stores.items():
            live, last = st.live_requests()
            pubs[name].publish(live, last, st.from_ns, st.depends(), lambda t: t)
        for name, st in stores.items():
            remote, r_last, _, depends = ring_dump.read_live(session, name, caches[name])
            st.set_remote(remote, r_last, now, depends)
        for st in stores.values():
            st.evict(now)
    kept = {}
    for n, st in stores.items():
        batches, _ = st.snapshot(10 * S)
        kept[n] = {r for b in batches["events"] for r in b.column("request").to_pylist() if r is not None}
    return kept, pubs["decode"].writes


def test_unchanged_live_set_is_not_rewritten_and_still_keeps_the_request(tmp_path):
    """Decode holds r from 1 s to 13 s and records nothing else: its live set {r} does not
    change for 11 s, so it writes (almost) no line then, yet prefill, done with r at 1 s and
    evicting every second, keeps r all along: at 14 s both windows hold r (decode's free
    is at 13 s), so a dump has both its ends. (A reader that took "no new line" for "no
    request live there" let r go on prefill after two slacks.)"""
    kept, writes = _exchange_run(tmp_path, decode_done_s=13)
    assert kept["decode"] == {"r"} == kept["prefill"]
    assert writes <= 4


def test_a_request_let_go_everywhere_leaves_both_shards(tmp_path):
    """The clean twin: decode is done with r at 2 s; the line saying so reaches prefill,
    and at 14 s neither window holds r (both let it go past the slack)."""
    kept, _ = _exchange_run(tmp_path, decode_done_s=2)
    assert kept["decode"] == set() == kept["prefill"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sets(st.sampled_from("abcdefgh"), max_size=4),
                          st.dictionaries(st.sampled_from("abcdefghij"), st.integers(1, 50), max_size=6),
                          st.sets(st.tuples(st.sampled_from("abcd"), st.sampled_from("efgh")), max_size=3),
                          st.booleans()),
                min_size=1, max_size=25),
       st.integers(0, 400))
def test_live_log_reader_sees_every_published_state(steps, compact):
    """ring_dump.LivePublisher writes only changes (and rewrites the file when the changes
    outgrow it: ``compact`` bytes here); a reader that reads after some publications and
    not others (the bool) sees, each time it reads, the writer's latest live set and ring
    start, and for every stop time and dependency the writer published, at least that
    (what a reader gets of a file rewritten whole each time: the log never loses one).
    Two stop times a line: a write of more spans several lines."""
    import tempfile
    from unittest import mock
    from kvtrace.tracer import ring_dump
    session = tempfile.mkdtemp(prefix="kvtrace-livelog-")
    os.makedirs(os.path.join(ring_dump.staging_dir(session), "w"))
    pub = ring_dump.LivePublisher(session, "w")
    cache: dict = {}
    last: dict = {}
    deps: set = set()
    with mock.patch.object(ring_dump, "COMPACT_BYTES", compact), mock.patch.object(ring_dump, "_LINE_TIMES", 2), \
            _removed(session):
        for i, (live, changed, new_deps, read) in enumerate(steps):
            for o, t in changed.items():      # a stop time is raised, never lowered
                last[o] = max(last.get(o, 0), t + i)
            deps |= new_deps
            now_last = {o: t for o, t in last.items() if o not in live}
            from_ns = None if i % 3 == 0 else i // 3
            pub.publish(sorted(live), now_last, from_ns, [list(d) for d in sorted(deps)], lambda t: t)
            if not read:
                continue
            r_live, r_last, r_from, r_deps = ring_dump.read_live(session, "reader", cache)
            assert r_live == live
            assert r_from == (None if from_ns is None else from_ns / 1e9)
            assert all(r_last.get(o, -1) >= t for o, t in now_last.items())
            assert {tuple(d) for d in r_deps} >= deps


@contextlib.contextmanager
def _removed(path: str):
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _deep_size(obj, seen: set) -> int:
    """Bytes of ``obj`` and everything it holds, each object once (sys.getsizeof)."""
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    n = sys.getsizeof(obj)
    if isinstance(obj, dict):
        n += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        n += sum(_deep_size(x, seen) for x in obj)
    return n


def _book_size(store) -> int:
    """The bookkeeping's own memory: its containers' deep size less an empty store's."""
    def of(s):
        return _deep_size((s._open, s._refs, s._last_t, s._slots, s._inflight, s._xfer_owner, s._deps,
                           s._remote), set())
    return of(store) - of(RingStore(window_ns=1))


@pytest.mark.parametrize("slots, sharers", [(64, 1), (64, 50), (64, 400), (512, 100)])
def test_book_bytes_covers_slots_many_requests_hold_at_once(slots, sharers):
    """A prefix-cache page held by many requests at once keeps one holder entry per request:
    the ring's size accounting counts them (it counted one per slot: at 400 holders of 64
    slots it said 0.44 MB for 1.08 MB). Its twin with one holder a slot stays covered."""
    rows = []
    for i in range(sharers):
        rows += [{"kind": "req_start", "request": f"r{i}", "agent": "a"},
                 {"kind": "alloc", "request": f"r{i}", "agent": "a", "pool": "kv",
                  "slots": list(range(slots))}]
    store = RingStore(window_ns=10**12)
    (b,) = _batches([rows])
    store.add("events", b)
    assert sum(len(h[1]) for h in store._slots[("a", "kv")].values() if isinstance(h, list)) == (
        slots * sharers if sharers > 1 else 0)          # every holder is in the state
    assert store.book_bytes >= _book_size(store)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_row, min_size=1, max_size=25), min_size=1, max_size=12))
def test_book_bytes_covers_the_bookkeeping_on_any_sequence(flushes):
    """Whatever allocs, frees, transfers and registrations arrive, the estimate the ring's size
    bound charges covers what the bookkeeping holds, its containers' first tables aside (a
    few KB a store: the per-ring reserve, ring_budget.SHARD_RESERVE, counts those)."""
    store = RingStore(window_ns=None, max_bytes=1 << 30)
    for b in _batches(flushes):
        store.add("events", b)
        assert store.book_bytes + _FIRST_TABLES >= _book_size(store)


#: the bookkeeping's containers' first hash tables (eight dicts and sets, ~0.2-0.7 KB each)
_FIRST_TABLES = 4096


def test_a_request_let_go_elsewhere_is_kept_until_that_shard_stopped_not_until_read():
    """Prefill is done with r at 1 s; decode holds r until 2 s and says so, but prefill
    reads that only at 2.7 s. Prefill must keep r up to 2 s, as decode does, not up to
    2.7 s: at an eviction cut of 2.3 s decode has let r go, and a prefill still holding it
    would dump r's receive without decode's send (the analysis then cuts both windows).
    Twin: had decode held r until 2.5 s, both keep it at that cut."""
    from kvtrace.tracer.schema import EVENTS as _EV
    S = 1_000_000_000
    for decode_stop, kept in ((2 * S, set()), (5 * S // 2, {"r"})):
        st = RingStore(window_ns=4 * S, slack_ns=S)
        st.add("events", pa.RecordBatch.from_pylist([
            {"seq": 0, "t_ns": S, "kind": "req_start", "request": "r", "agent": "p"},
            {"seq": 1, "t_ns": S + 1, "kind": "req_done", "request": "r", "agent": "p"}], schema=_EV))
        st.set_remote({"r"}, {}, 3 * S // 2)                       # decode holds r
        st.set_remote(set(), {"r": decode_stop}, 27 * S // 10)     # read late: decode let r go
        st.add("events", pa.RecordBatch.from_pylist([
            {"seq": 2, "t_ns": 8 * S, "kind": "mark", "agent": "p"}], schema=_EV))
        st.evict(83 * S // 10)                                      # cut: 8.3 s - 4 s - 2 slacks = 2.3 s
        held = {o for _, _, owners in st.pinned for o in owners if isinstance(o, str)}   # what eviction kept
        assert held == kept, (decode_stop, held)
