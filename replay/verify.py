"""Verifier: is every read of a run the data the program meant it to read?

The expectation for a read is its data flow — what the slot holds when every transfer
delivers its source exactly as it was at post (the eager schedule, run once
symbolically) — checked against intent: a read of (pool, layer, page) must see that
(pool, layer, page) of some request; when the data flow itself delivers something else
(a wrong-index descriptor, a post before the write), the reading request's own page is
expected. A page assembled from slices of one source page (head-split TP) is intended
when each byte holds its own token's bytes and its pages take the same slices
(assembled.py). Observed bytes are also compared with the recorded read checksum when the
trace has one (a difference there is reported, not counted as corruption: the
recording itself may have been corrupted) — but only where replay's bytes stand for the
recorded ones: a read expected to hold a page whose recorded write checksum is not the
one replay writes for it (a real engine's data: SGLang's) is counted as not compared, since
the checksum of bytes composed from those pages is unknowable from the trace.
In a partial trace (a shard missing, unclosed or cut short, a flight-recorder window
without its kept state) a read the data flow leaves without its request's bytes is not
decidable — what filled it may be in what the trace lost — and is counted apart.
"""
from __future__ import annotations

import collections
import dataclasses
import json

from .assembled import assembled_shape, source_token_bytes, token_bytes, unreproduced_atoms
from .engine import execute
from .schedulers.eager import EagerScheduler
from .symbolic import SymbolicExecutor, clip, full


@dataclasses.dataclass
class BadRead:
    """One slot of one read that saw the wrong bytes."""
    op: int
    slot: int
    request: str
    pool: str
    layer: int
    page: int | None
    found: str                      # whose bytes were there, in words


@dataclasses.dataclass
class Verdict:
    """Verification summary of one run."""
    reads_verified: int = 0
    bad: list[tuple] = dataclasses.field(default_factory=list)   # (op, slot index, observed)
    recorded_differs: int = 0
    recorded_compared: int = 0
    recorded_skipped: int = 0       # read slots whose expected bytes replay cannot reproduce
    stale_moves: list[int] = dataclasses.field(default_factory=list)
    out_of_bounds: int = 0
    undecidable: int = 0            # slot-reads a partial trace cannot decide (expectations)
    trace_has_reads: bool = True
    graph: object = None
    executor: object = None
    _corrupted: list | None = None

    @property
    def corrupted(self) -> list[BadRead]:
        """Every slot-read that saw the wrong bytes (described on first use: exploring
        thousands of failing schedules only needs to know that one failed)."""
        if self._corrupted is None:
            c, g, ex = self.graph.col, self.graph, self.executor
            self._corrupted = [BadRead(op, c["slots"][op][i], c["request"][op], c["pool"][op], c["layer"][op],
                                       g.pages[op][i], ex.describe(obs, g, _ext(g, op, i))) for op, i, obs in self.bad]
        return self._corrupted

    @property
    def failed(self) -> bool:
        """Corruption found: a bad read, or (no reads recorded) a transfer that did not
        deliver its source as it was at post, or a descriptor outside memory."""
        return bool(self.bad or self.out_of_bounds or (not self.trace_has_reads and self.stale_moves))

    def signature(self) -> tuple:
        """Identity of the findings (for determinism and round-trip checks)."""
        return (tuple((op, i) for op, i, _obs in self.bad), hash(tuple(o for _op, _i, o in self.bad)),
                tuple(self.stale_moves), self.out_of_bounds)

    def lines(self, graph) -> list[str]:
        """A short summary for people: counts, then corruption grouped by victim and culprit."""
        out = [f"reads verified: {self.reads_verified} slot-reads, corrupted: {len(self.corrupted)}"]
        if self.recorded_compared:
            out.append(f"compared with recorded read checksums: {self.recorded_compared}, "
                       f"differing: {self.recorded_differs}")
        if self.recorded_skipped:
            out.append(f"not compared with recorded read checksums: {self.recorded_skipped} (they hold recorded "
                       f"bytes replay does not reproduce: the trace's write checksums are not replay's)")
        if self.stale_moves:
            out.append(f"transfers that moved a source changed since their post: {len(self.stale_moves)}"
                       + ("" if self.trace_has_reads else " (corruption: the trace has no reads)"))
        if self.out_of_bounds:
            out.append(f"descriptors outside the re-created memory (not executed): {self.out_of_bounds}")
        if self.undecidable:
            out.append(f"not decidable: {self.undecidable} slot-read(s) the recorded writes and transfers do not "
                       f"fill with their request's bytes; the trace is partial (see the notes), so what filled them "
                       f"may be in what it lost")
        groups = collections.Counter((b.request, b.pool, b.found.split(" (")[0]) for b in self.corrupted)
        for (req, pool, found), n in groups.most_common(12):
            out.append(f"  {req} read {n} slot-read(s) of {pool} holding {found}")
        if len(groups) > 12:
            out.append(f"  ... and {len(groups) - 12} more groups")
        if self.corrupted:
            b = self.corrupted[0]
            out.append(f"  first: {graph.describe(b.op)} — slot {b.slot} (page {b.page}) held {b.found}")
        return out


def _ext(g, op: int, i: int):
    e = g.extent[op]
    return None if e is None else e[i]


class _WriterTracking(SymbolicExecutor):
    """The symbolic executor, also noting which request's operation last wrote each cell
    (a write's request, or the request of the transfer whose move landed)."""

    def start(self, graph) -> None:
        super().start(graph)
        self.writer: dict[int, str | None] = {}
        self.seen_writers: dict[int, list] = {}

    def write(self, op: int) -> None:
        super().write(op)
        for cell in self.g.cells[op]:
            self.writer[cell] = self.g.col["request"][op]

    def move(self, m: int) -> bool:
        same = super().move(m)
        g = self.g
        req = g.transfers[g.move_xfer[m - g.n_prog]].request
        for p in g.move_pieces[m - g.n_prog]:
            self.writer[p[2]] = req
        return same

    def read(self, op: int) -> list:
        self.seen_writers[op] = [self.writer.get(c) for c in self.g.cells[op]]
        return super().read(op)


def _sharing(graph) -> tuple[set, dict]:
    """Slots each request holds by reference (prefix cache), and whose data each request
    may legitimately hold: its own, the holders' of the slots it shares, and the
    ``src_request`` of its writes."""
    c = graph.col
    shared, legit = set(), collections.defaultdict(set)
    holders = collections.defaultdict(set)   # (agent, pool, slot) -> requests holding it
    for op in range(graph.n_prog):
        k, req = c["kind"][op], c["request"][op]
        if k == "alloc":
            is_shared = bool(c["detail"][op] and '"shared"' in c["detail"][op])
            for s in c["slots"][op] or []:
                key = (c["agent"][op], c["pool"][op], s)
                if is_shared:
                    shared.add((c["agent"][op], req) + key[1:])
                    legit[req] |= holders[key]
                holders[key].add(req)
        elif k == "free":
            for s in c["slots"][op] or []:
                holders[(c["agent"][op], c["pool"][op], s)].discard(req)
        elif k == "write" and c["detail"][op] and "src_request" in c["detail"][op]:
            legit[req].add(json.loads(c["detail"][op]).get("src_request"))
    return shared, legit


def expectations(graph) -> dict[int, list]:
    """Expected content of every read slot (cached on the graph).

    The eager data flow is accepted when its bytes are the read's (pool, layer, page)
    and came by the reading request's own write or transfer, or sit in a slot the
    request shares (prefix cache); otherwise the request's own page is expected — a
    late transfer of another request, a wrong-index descriptor or a post before the
    write make the data flow itself wrong. The bytes may be one whole page, or one
    page assembled slice by slice (head-split TP): then every token must take its
    own token's bytes, every token the same slices, and the page the slices most
    pages of its region take (assembled.py)."""
    cached = getattr(graph, "_expected", None)
    if cached is not None:
        return cached
    ex = _WriterTracking()
    res = execute(graph, EagerScheduler(), ex)
    c = graph.col
    shared, legit_data = _sharing(graph)
    src_tok = source_token_bytes(graph)
    out = {}
    undecidable = 0                 # slot-reads a partial trace cannot decide (below)
    shaped = []                     # (op, i, region key, shape): assembled pages, decided below
    for op, observed in res.reads.items():
        exp = []
        req, agent, pool = c["request"][op], c["agent"][op], c["pool"][op]
        dst_tok = token_bytes(graph.layouts.get((agent, pool, c["layer"][op])))
        for i, content in enumerate(observed):
            page = graph.pages[op][i]
            cell = graph.cells[op][i]
            if content is None or page is None:
                exp.append(content)
                continue
            want = (c["pool"][op], c["layer"][op], page)
            own = full((c["request"][op],) + want, graph.mem.cells[cell].size)
            ext = _ext(graph, op, i)
            head = content if ext is None else clip(content, ext)   # the bytes in use
            writer = ex.seen_writers[op][i]
            by_shared = (agent, req, pool, c["slots"][op][i]) in shared
            legit = writer is None or writer == req or by_shared
            atom = head[0][2] if head else None
            intended = legit and atom is not None and atom[1] != "mem" and tuple(atom[1:]) == want \
                and (by_shared or atom[0] == req or atom[0] in legit_data[req])
            if intended and len(head) == 1 and head[0][0] == head[0][3] == 0:
                exp.append(content)
                continue
            shape = assembled_shape(head, dst_tok, src_tok) if intended else None
            if shape is not None:
                shaped.append((op, i, (agent, pool, src_tok[atom]), shape))
            if shape is None and graph.partial and (
                    any(seg[2] is None for seg in head)     # bytes nothing recorded delivered
                    or writer != req):
                # the recorded writes and transfers did not fill the slot with the reader's bytes; in a
                # partial trace the one that did may be in what it lost: undecidable, not corrupted
                # (wrong bytes the request's own recorded write or transfer put there still decide)
                exp.append(None)
                undecidable += 1
                continue
            exp.append(content if shape is not None else own)
        out[op] = exp
    # a pool's pages take the same slices from the same source geometry (a rank holds the
    # same heads of every page and layer): pages assembled otherwise than most of them
    # expect the request's own page (on a tie no shape is the majority: all of them do)
    votes = collections.Counter((key, shape) for _op, _i, key, shape in shaped)
    top = collections.defaultdict(list)
    for (key, shape), n in votes.items():
        top[key].append((n, shape))
    best = {}
    for key, ns in top.items():
        ns.sort(reverse=True)
        best[key] = ns[0][1] if len(ns) == 1 or ns[0][0] > ns[1][0] else None
    for op, i, key, shape in shaped:
        if best[key] != shape:
            cell = graph.cells[op][i]
            out[op][i] = full((c["request"][op], c["pool"][op], c["layer"][op], graph.pages[op][i]),
                              graph.mem.cells[cell].size)
    graph._expected = out
    graph._undecidable = undecidable
    return out


def verify(graph, result, executor, compare_recorded: bool = True) -> Verdict:
    """Check every read of ``result`` (made by ``executor``) against its expectation."""
    exp = expectations(graph)
    c = graph.col
    v = Verdict(trace_has_reads=bool(exp), graph=graph, executor=executor,
                undecidable=getattr(graph, "_undecidable", 0))
    v.out_of_bounds = sum(len(t.out_of_bounds) for t in graph.transfers)
    v.stale_moves = list(result.stale_moves)
    fast = getattr(executor, "name", "") == "symbolic"
    unreproduced = unreproduced_atoms(graph) if compare_recorded else frozenset()
    for op, observed in result.reads.items():
        want = exp.get(op, [])
        rec = c["checksums"][op] if compare_recorded else None
        if fast and not rec and observed == want:   # every slot as expected: count, move on
            v.reads_verified += sum(1 for w in want if w is not None)
            continue
        got_cs = executor.checksums(op, observed) if rec else None
        for i, obs in enumerate(observed):
            if obs is None or i >= len(want) or want[i] is None:
                continue
            v.reads_verified += 1
            ext = _ext(graph, op, i)
            if fast and ext is None:
                if obs != want[i]:
                    v.bad.append((op, i, obs))
            elif not executor.matches(obs, want[i], graph.mem.cells[graph.cells[op][i]].size, ext):
                v.bad.append((op, i, obs))
            if rec and i < len(rec) and rec[i] is not None:
                if unreproduced and any(seg[2] in unreproduced for seg in want[i]):
                    v.recorded_skipped += 1     # replay's bytes do not stand for these
                    continue
                v.recorded_compared += 1
                v.recorded_differs += int(got_cs[i] != rec[i])
    return v
