"""A shard cut at its *start*: a flight-recorder window whose kept state was dropped.

A ring dump (docs/ring.md) writes, per shard, the events from ``ring.window.from_seq`` on
(contiguous: every event the process recorded from there to the window's end) and, before
them, the facts its ring *kept* because the window refers to them (allocs of slots still
held, live requests, transfers in flight, registrations). When those kept facts outgrew the
ring they were dropped and shard.json says ``ring.window.state_complete: false``: an event
before ``from_seq`` is then a present fact, but the absence of one proves nothing (it may
have been evicted). Every check reasons from absence somewhere ("no alloc of the slot by the
request before the post", "no free since the alloc", "no write since the read's last
transfer", "no register covers the range"), so on such a shard the analysis keeps only what
does not depend on the unknown past:

* A request is *checked* when it began inside the windows. A request exists from its
  first ``req_start`` on, and every side that handles it records one; so one with its
  ``req_start`` inside the window of every start-cut shard it touches (events there, or an
  agent of it named in a post's peer or descriptors), the earliest at or after every
  start-cut shard's window start (``from_t_ns``, one host's clock), and no event of it
  earlier, has every fact in the contiguous windows. Every other request touching a
  start-cut shard,
  and every request tied to one through a page's content (a prefix-cache reference,
  ``alloc`` with ``detail.shared``, continues the generation of the slot's latest
  non-shared alloc, on every shard; a ``write`` with ``detail.src_request`` copies another
  request's data), is *unsure*: its allocs, frees and reads and its transfers' descriptor
  rows are left out of the analysed ``events`` and ``descs``, on every shard. A shared
  alloc on a start-cut shard whose generation start is not in the trace is unsure as well
  (the page's content came from the unknown past).
* Writes stay, whoever made them: a write inside a window is a fact of what the slot holds
  from then on (a checked request's source page may hold an unsure request's bytes). A
  write before a start-cut shard's ``from_seq`` loses its checksums (a later one may be
  missing), so the data flow predicts nothing from it.
* Allocs, frees and reads without a request on a start-cut shard, and the descriptors of
  transfers without a request posted there before ``from_seq``, are left out the same way.
* A start-cut shard's ``register`` / ``deregister`` events are left out: with some of them
  missing, "no registration covers this range" would be a guess; without any, the checks
  take the agent's layouts as its registered memory, as they do for a program that records
  none.

What stays is sound on its own: the slot histories of checked requests start inside the
window (whatever an unsure holder did to a slot is left out, never half of it), and their
transfers, reads and writes, and every write to their slots, are complete there. Every other recorded event (transfers'
posts and completions, notifications, messages: the happens-before edges) stays, since a
present fact is a fact; a receive whose send lies in the sender's start gap does not cut
the receiver (cut.py, send_in_start_gap: the sender's window,
on the same host's clock, reaches past the receive, so the send is not in a lost tail). One note says what was left out and why.

A window with ``state_complete: true`` is left as it is: the ring kept every request it
still refers to whole, with both its sides (docs/ring.md, "What is kept").

Costs nothing on a trace without such a shard: nothing here runs.
"""
from __future__ import annotations

import pyarrow as pa

#: what the user can do about a window whose kept state was dropped
RECORD = ("record with a larger ring (`--ring SIZE`: the kept facts fit in half of what the budget "
          "leaves the batches), or a shorter window (`--ring DURATION`)")


#: what the user can do about requests a window's processes disagree on at its start
LET_GO = ("nothing for the requests that began inside the window; to check the ones at its start, dump a "
          "longer window (`--ring DURATION`) so that they begin inside it")


def start_cuts(trace) -> dict[str, int]:
    """Per shard whose ring window's kept state is incomplete, its ``from_seq``: events
    before it are present facts, their absence proves nothing. A window that says nothing
    trustworthy (``state_complete`` not literally true, ``from_seq`` not an integer: an
    empty window) starts after the shard's last seq: every event of it is before the window."""
    out = {}
    for s in trace.shards:
        info = s.info if isinstance(s.info, dict) else {}
        ring = info.get("ring")
        if not isinstance(ring, dict):
            continue
        w = ring.get("window")
        if isinstance(w, dict) and w.get("state_complete") is True:
            continue
        out[s.name] = _from_seq(w)
    return out


def window_from_seq(trace, name: str) -> int:
    """The first seq of shard ``name``'s ring window, read as start_cuts reads it."""
    for s in trace.shards:
        if s.name == name and isinstance(s.info, dict) and isinstance(s.info.get("ring"), dict):
            return _from_seq(s.info["ring"].get("window"))
    return 2**62


def _from_seq(window) -> int:
    """A shard.json ``ring.window``'s ``from_seq``; past the shard's last seq when it is
    not an integer (the window says nothing trustworthy)."""
    f = window.get("from_seq") if isinstance(window, dict) else None
    return f if isinstance(f, int) and not isinstance(f, bool) else 2**62


def send_in_start_gap(trace, sender: str, receiver: str, t_ns) -> bool:
    """A receive on ``receiver`` at ``t_ns`` whose send is not in the trace was sent in the
    start gap of ``sender`` (a ring window), not past its end: both shards are on one host's
    clock (shard.json ``clock``), and the sender's window reaches past the receive
    (``ring.window.to_t_ns``: a ring dump records every event up to there; a message's send
    comes before its receipt)."""
    by = {s.name: s.info for s in trace.shards if isinstance(s.info, dict)}
    si, ri = by.get(sender), by.get(receiver)
    if si is None or ri is None or not isinstance(t_ns, int):
        return False
    ring = si.get("ring")
    w = ring.get("window") if isinstance(ring, dict) else None
    end = w.get("to_t_ns") if isinstance(w, dict) else None
    clock = si.get("clock")
    return (isinstance(clock, str) and clock.startswith("monotonic_ns@") and clock == ri.get("clock")
            and isinstance(end, int) and not isinstance(end, bool) and t_ns <= end)


def unsure_requests(con, trace, starts: dict[str, int]) -> list[str]:
    """The requests whose facts may reach back before a start-cut shard's window (see the
    module doc), over the model's ``events`` (already cut at the shards' ends)."""
    from .sqltext import query_sql

    con.from_arrow(start_table(trace, starts)).create("start_cut")
    seeds = {r for (r,) in con.execute(query_sql("window_unsure_seeds")).fetchall()}
    edges = con.execute(query_sql("window_generation_edges")).fetchall()
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    bad = {find(r) for r in seeds}
    return sorted(r for r in {x for e in edges for x in e} | seeds if find(r) in bad)


def start_table(trace, starts: dict[str, int]) -> pa.Table:
    """The table start_cut: per start-cut shard, its window's from_seq and from_t_ns (its
    start on the shard's clock; null for every shard unless all the trace's shards are on
    one host's monotonic clock, which is what makes times across shards comparable)."""
    infos = {s.name: (s.info if isinstance(s.info, dict) else {}) for s in trace.shards}
    clocks = {i.get("clock") for i in infos.values()}
    one = len(clocks) == 1 and isinstance(next(iter(clocks)), str) and next(iter(clocks)).startswith("monotonic_ns@")

    def t0(name):
        ring = infos[name].get("ring")
        w = ring.get("window") if isinstance(ring, dict) else None
        t = w.get("from_t_ns") if isinstance(w, dict) else None
        return t if one and isinstance(t, int) and not isinstance(t, bool) else None
    return pa.table({"shard": pa.array(list(starts), pa.string()),
                     "from_seq": pa.array(list(starts.values()), pa.int64()),
                     "from_t_ns": pa.array([t0(n) for n in starts], pa.int64())})


def apply(model, starts: dict[str, int], let_go: dict[str, list[str]] | None = None) -> list[tuple[str, int, str]]:
    """Leave out of the analysed ``events`` and ``descs`` what depends on facts before a
    start-cut shard's window (module doc). Call after cut.py pointed them at the cut
    prefix (``recorded_*`` and ``shard_cut`` exist). ``let_go``: start-cut shards whose
    window says its kept state is complete, yet let go of sends that receives elsewhere
    show (cut.py; user text per receive). Returns, per start-cut shard, what is unknown,
    how many events were left out, and what to record (cut.Unknown's fields)."""
    from .sqltext import query_sql

    con = model.con
    unsure = unsure_requests(con, model.trace, starts)
    con.from_arrow(pa.table({"request": pa.array(unsure, pa.string())})).create("window_unsure")
    con.execute(query_sql("window_events"))
    con.execute(query_sql("window_descs"))
    left = dict(con.execute(query_sql("window_left_out")).fetchall())
    out = []
    for shard, f in starts.items():
        n = int(left.get(shard, 0))
        at = "every event of it is before its window" if f >= 2**62 else f"before seq {f:,}"
        if let_go and shard in let_go:
            seen = let_go[shard]
            out.append((
                f"shard {shard}: its ring window let go of requests another shard's window still holds at its start "
                f"({seen[0]}{f', and {len(seen) - 1:,} more receive(s)' if len(seen) > 1 else ''}: each process decides "
                f"alone which requests finished before the window), so what happened {at} is known only in part; "
                f"{len(unsure):,} request(s) whose facts reach back there (or share a page generation with one) are "
                f"not checked, nor transfers without a request posted before it or this shard's registrations; "
                f"requests that began inside the window are checked whole", n, LET_GO))
            continue
        out.append((
            f"shard {shard}: a ring window whose kept state was dropped (ring.window.state_complete is not true), so "
            f"what happened {at} is known only in part; {len(unsure):,} request(s) whose facts reach back there (or "
            f"share a page generation with one) are not checked, nor transfers without a request posted before it "
            f"or this shard's registrations: their allocs, frees, reads and descriptors left out, and no "
            f"checksum predicted from a write before the window", n, RECORD))
    return out
