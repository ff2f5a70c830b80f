"""Loader: a trace → the operation graph replay executes.

Operations are the recorded program events (ids ``0..n_prog-1``, in (shard, seq) order)
followed by the data movements (*moves*) of every transfer, one per descriptor chunk.
Program events keep their program order per (shard, thread) (the model's ``prog_order``)
and their recorded slots;
a move is enabled by its ``xfer_post`` and must run before the transfer's completion
observations (``xfer_done``/``xfer_error`` on the initiator, the paired ``notif_recv``
on the target). Cross-shard waits are the trace model's send → receive pairs
(``kvtrace.model``: post/notif_send → notif_recv, msg_send → msg_recv).
Events of one shard on different threads that touch the same cell keep their recorded
order too (the engine's own locking and hand-offs are not in the trace; the analysis
orders a whole process by seq): a write or read touches its slots, an ``xfer_post`` its
local cells (its descriptor ends in memory of the posting shard's agents: what a WRITE
reads, what a READ fills), so a post handed to another thread after its source write
never runs first; its moves stay free to race later writes (``recorded_order_waits``;
a what-if that changes what ops touch re-derives them). Descriptor ends in layout slots,
within one slot or spanning a run of them, are the model's (``desc_end``); the
registered and prepared-list ranges too (``mem_ranges``); replay cuts cells of what no
layout without a K/V part covers itself.
"""
from __future__ import annotations

import collections
import dataclasses

from ..errors import TraceError, UsageError
from ..model.cut import is_complete
from ..tracer.reader import open_trace
from .memory import MemoryMap
from .pairing import Transfer, transfers
from .pairing import detail as _detail

#: the largest slot (or unstructured range between descriptor ends) replay materializes
REPLAY_MAX_CELL_BYTES = 1 << 30

COLUMNS = ("shard", "seq", "t_ns", "thread", "agent", "kind", "request", "pool", "layer", "slots",
           "pages", "checksums", "xfer", "peer", "addr", "nbytes", "mem_type", "device", "msg",
           "status", "detail")
VISIBLE = frozenset({"write", "read"})   # program events whose order against moves matters


@dataclasses.dataclass
class Graph:
    """Everything a run needs, as flat per-op lists (op ids index them)."""
    path: str
    manifest: dict
    col: dict[str, list]            # recorded columns of program ops
    n_prog: int
    threads: list[list[int]]        # program op ids per (shard, thread)
    thread_names: list[tuple]
    thread_of: list[int]
    waits: list[list[int]]          # ops that must run first (beyond program order)
    cells: list[list]               # write/read: cell per slot (None: no layout)
    pages: list[list]               # write/read: page per slot (None: unknown)
    extent: list                    # write/read: bytes of each slot in use (None: the whole slot)
    transfers: list[Transfer]
    move_xfer: list[int]            # per move (op - n_prog): transfer index
    move_pieces: list[list[tuple]]  # per move: (src cell, src off, dst cell, dst off, n)
    mem: MemoryMap
    layouts: dict
    descs_tables: dict
    dlists_tables: dict
    layouts_tables: dict
    notes: list[str]
    requests: list[str]
    order_waits: list[list[int]]    # the part of waits that is recorded_order_waits (a what-if re-derives it)
    #: the trace is partial (a shard missing, unclosed or cut short, rows lost, a flight-recorder
    #: window without its kept state: kvtrace.model.cut.is_complete): a write or transfer that
    #: would have filled a slot may be in what it lost, so the verifier does not take a slot the
    #: data flow left without its reader's bytes as corruption (verify.expectations)
    partial: bool = False

    @property
    def n_ops(self) -> int:
        return self.n_prog + len(self.move_xfer)

    def is_move(self, op: int) -> bool:
        return op >= self.n_prog

    def kind(self, op: int) -> str:
        return "move" if op >= self.n_prog else self.col["kind"][op]

    def describe(self, op: int) -> str:
        """One line naming an operation for people."""
        if op >= self.n_prog:
            t = self.transfers[self.move_xfer[op - self.n_prog]]
            return f"move of xfer {t.shard}:{t.xfer} ({t.request})"
        c = self.col
        s = f"{c['shard'][op]}#{c['seq'][op]} {c['kind'][op]} {c['request'][op] or ''}".rstrip()
        if c["slots"][op]:
            s += f" {c['pool'][op]} L{c['layer'][op]} slots {list(c['slots'][op])}"
        return s


def load(path: str, chunks: int = 1, fault: str | None = None) -> Graph:
    """Build the operation graph of a trace.

    Args:
        path: trace directory.
        chunks: split every transfer's descriptors into at most this many moves.
        fault: ``"notify-before-data"`` makes a transfer's notification independent of
            its data (the data then lands after the notification, NIXL #252).
    Raises:
        TraceError: unusable trace.
    """
    if fault not in (None, "notify-before-data"):
        raise UsageError(f"unknown fault {fault!r} (known: notify-before-data)")
    tr = open_trace(path)
    ev = tr.table("events")
    if ev.num_rows:
        import pyarrow.compute as pc
        ev = ev.filter(pc.not_equal(ev.column("kind"), "move"))  # replaying a replay
    ev = ev.sort_by([("shard", "ascending"), ("seq", "ascending")])
    col = {c: ev.column(c).to_pylist() for c in COLUMNS}
    n = ev.num_rows
    notes = list(tr.notes)
    mem = MemoryMap()
    lay = tr.table("layouts").to_pylist()
    layouts = {}
    for r in lay:
        layouts[(r["agent"], r["pool"], r["layer"])] = r  # K/V parts: the last row wins
    for r in layouts.values():
        mem.add_layout(r["agent"], r["pool"], r["layer"], r["addr"], r["slot_bytes"], r["num_slots"])
    pairs, ends, order, ranges = _model_facts(tr)
    for a, ad, nb in ranges:          # prepared lists, then registered regions
        mem.add_range(a, ad, nb)
    dt = tr.table("descs")
    dcols = {c: dt.column(c).to_pylist() for c in ("shard", "xfer", "pos", "op", "src_agent", "src_addr",
                                                     "dst_agent", "dst_addr", "nbytes")}
    descs_by = collections.defaultdict(list)
    for i in range(dt.num_rows):
        d = tuple(dcols[c][i] for c in ("pos", "op", "src_agent", "src_addr", "dst_agent", "dst_addr", "nbytes"))
        descs_by[(dcols["shard"][i], dcols["xfer"][i])].append(d)
        mem.add_boundary(d[2], d[3], d[6])
        mem.add_boundary(d[4], d[5], d[6])
    mem.finish()

    # program order per (shard, thread): the model's prog_order
    op_of = {k: op for op, k in enumerate(zip(col["shard"], col["seq"]))}
    if len(op_of) < n:   # two events under one (shard, seq): program order cannot name either
        sh, q = next(k for k, c in collections.Counter(zip(col["shard"], col["seq"])).items() if c > 1)
        raise TraceError(f"shard {sh}: event seq {q} appears more than once; replay needs every event's "
                         f"seq unique within its shard (`kvtrace check` still analyses it, its order marked unreliable)")
    threads: list[list[int]] = []
    thread_names: list[tuple] = []
    thread_of = [0] * n
    runs = [((sh, th), ops) for sh, th, seqs in order
            if (ops := [op_of[(sh, q)] for q in seqs if (sh, q) in op_of])]   # replayed moves are no program
    for name, ops in sorted(runs, key=lambda r: r[1][0]):    # threads by their first event
        for op in ops:
            thread_of[op] = len(threads)
        thread_names.append(name)
        threads.append(ops)
    waits: list[list[int]] = [[] for _ in range(n)]
    cells: list[list] = [None] * n
    pages: list[list] = [None] * n
    extent: list = [None] * n
    tokens: dict[tuple, int] = {}
    owner_page: dict[tuple, int] = {}
    missing_layout = set()
    for op in range(n):
        k = col["kind"][op]
        if k == "req_start":
            t = _detail(col["detail"][op]).get("tokens")
            if isinstance(t, int):
                tokens[(col["agent"][op], col["request"][op])] = t
        elif k == "alloc":
            for s, p in zip(col["slots"][op] or [], col["pages"][op] or []):
                owner_page[(col["agent"][op], col["pool"][op], s)] = p
        elif k in VISIBLE:
            a, pool, layer, slots = col["agent"][op], col["pool"][op], col["layer"][op], col["slots"][op] or []
            if not mem.has_layout(a, pool, layer):
                missing_layout.add((a, pool, layer))
            cells[op] = [mem.slot_cell(a, pool, layer, s) for s in slots]
            pg = col["pages"][op]
            pages[op] = list(pg) if pg else [owner_page.get((a, pool, s)) for s in slots]
            extent[op] = _extents(layouts.get((a, pool, layer)), tokens.get((a, col["request"][op])), pages[op])
    for m in sorted(missing_layout, key=str):
        notes.append(f"no layout for {m[0]} pool {m[1]} layer {m[2]}: its writes/reads are not replayed")

    xfers, move_xfer, move_pieces = transfers(col, n, descs_by, mem, chunks, fault, waits, notes,
                                              pairs, op_of, ends)
    order_waits = recorded_order_waits(col, thread_of, cells, xfers, move_pieces, mem)
    for op, w in enumerate(order_waits):
        waits[op].extend(w)
    big = max(mem.cells, key=lambda c: c.size, default=None)
    if big is not None and big.size > REPLAY_MAX_CELL_BYTES:   # replay holds each touched slot's bytes
        raise TraceError(f"{big.label()} is {big.size} bytes: replay holds every slot it touches in memory, "
                         f"up to {REPLAY_MAX_CELL_BYTES >> 20} MiB a slot")
    requests = sorted({r for r in col["request"] if r})
    return Graph(tr.path, tr.manifest, col, n, threads, thread_names, thread_of, waits, cells, pages, extent,
                 xfers, move_xfer, move_pieces, mem, layouts,
                 {s.name: s.streams["descs"].table for s in tr.shards},
                 {s.name: s.streams["dlists"].table for s in tr.shards},
                 {s.name: s.streams["layouts"].table for s in tr.shards}, notes, requests, order_waits,
                 partial=not is_complete(tr))


def recorded_order_waits(col, thread_of, cells, xfers, move_pieces, mem) -> list[list[int]]:
    """Per program op, what it waits for because events of one shard on different threads
    that touch the same cell keep their recorded order: the last earlier such touch of
    each of its cells (the engine's own locking and hand-offs are not in the trace; the
    analysis orders a whole process by seq). A write or read touches its slots; an
    ``xfer_post`` touches its local cells, the descriptor ends in memory of an agent of
    the posting shard (what a WRITE reads, what a READ fills): the post waits for the
    write that filled its source on another thread, and a later touch on another thread
    waits for the post. Only the post is ordered, never its moves, so a later write still
    races the bytes in flight."""
    n = len(cells)
    agents: dict[str, set] = collections.defaultdict(set)
    for sh, a in zip(col["shard"], col["agent"]):
        agents[sh].add(a)
    touched = list(cells)
    for t in xfers:
        local = agents[t.shard]
        touched[t.post] = list(dict.fromkeys(
            c for m in t.chunks for sc, _, dc, _, _ in move_pieces[m - n] for c in (sc, dc)
            if mem.cells[c].agent in local))
    shard = col["shard"]
    waits: list[list[int]] = [[] for _ in range(n)]
    last_touch: dict[int, int] = {}
    for op, cs in enumerate(touched):
        for c in cs or ():
            prev = last_touch.get(c)
            if prev is not None and thread_of[prev] != thread_of[op] and shard[prev] == shard[op]:
                waits[op].append(prev)
            if c is not None:
                last_touch[c] = op
    return waits


def _model_facts(tr):
    """From the trace model: the send → receive pairs (as columns); the descriptor ends
    layouts place in slots, (shard, xfer, pos, side) → [(pool, layer, slot, offset, n)]
    (one per slot of a run); program order, [(shard, thread, [seq, ...])]; and the
    prepared-list and registered ranges, [(agent, addr, nbytes)]."""
    from ..model import TraceModel

    with TraceModel(tr) as m:
        m.derive(["sync_pairs", "desc_end", "prog_order", "shards"])
        p = m.ask("pairs")
        e = m.ask("slot_pieces").to_pydict()
        o = m.ask("thread_order").to_pydict()
        r = m.ask("mem_ranges").to_pydict()
    ends: dict[tuple, list] = {}
    for k, v in zip(zip(e["shard"], e["xfer"], e["pos"], e["side"]),
                    zip(e["pool"], e["layer"], e["slot"], e["off"], e["n"])):
        ends.setdefault(k, []).append(v)     # in piece order (the query sorts by k)
    order = list(zip(o["shard"], o["thread"], o["seqs"]))
    ranges = list(zip(r["agent"], r["addr"], r["nbytes"]))
    return {c: p.column(c).to_pylist() for c in p.column_names}, ends, order, ranges


def _extents(layout, tokens, pages):
    """Bytes in use of each page: a sequence of ``tokens`` fills its last page only partly
    (the tail keeps whatever it held). None when every page is full or unknown."""
    if not layout or tokens is None or not layout.get("page_tokens"):
        return None
    pt, sb = layout["page_tokens"], layout["slot_bytes"]
    if sb % pt:
        return None
    out = []
    for p in pages:
        used = 0 if p is None else max(0, min(pt, tokens - p * pt)) * (sb // pt)
        out.append(used if 0 < used < sb else None)
    return out if any(e is not None for e in out) else None
