"""The analysed part of a partial trace: per shard, the last seq whose facts are known
(a consistent cut), and what lies beyond it.

A shard's recorded facts can end early: a stream cut mid-batch (crash), a process killed
before it closed its shard (its unflushed tail is lost), descriptor rows lost while the
events that post them survived (at the end of a cut stream, or anywhere when the recorder
counted them lost: a write that failed mid-run, or when their bytes fall short of the posts'
with nothing counted: a stream damaged or edited after recording), or a shard missing altogether. Past that
point the facts are *unknown*, not absent: a free that is not there may have happened, a notification
that is not there may have been received. Checks reason from absence ("no completion
observation happens-before the free"), so they must only look where absence is a fact.

The cut is the largest prefix of every shard that (1) ends at or before the shard's own
recorded end (its last event when not closed cleanly; the post before the first one whose
descriptors or lists were lost) and (2) is causally closed: every receive in it has its
send in it. A receive whose send lies in a lost tail or a missing shard (a notification
of a post the crash lost) ends its shard's prefix just before it, since from there the
shard knows things the trace does not. (2) is a fixed point over the send → receive pairs.

A trace whose every listed shard is present, closed and untruncated, with no rows its
recorder counted lost and descriptor rows that add up to its posts' bytes, is complete:
nothing is cut and this module costs one pass over per-shard totals (desc_bytes_short).
Otherwise the analysis views (``events``, ``descs``) read the cut prefix;
``recorded_events`` / ``recorded_descs`` keep everything recorded.

A shard can also be cut at its *start*: a flight-recorder window whose kept state was
dropped (shard.json ``ring.window.state_complete`` not true). window.py leaves what
depends on its unknown past out of ``events`` and ``descs``; a receive whose send lies in
such a start gap does not cut its receiver. Nor does one whose send a window with complete
kept state let go (its shards decide apart what finished before the window's cut): that
sender is then cut at its start as well.

Postings NIXL ran that a recorder saw but could not record (shard.json
``untraced_postings``: a handle made before the tap) cut nothing, since every recorded
fact stands, but no absence of a delivery is a fact in their process (shard_cut.untraced).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from ..tracer.reader import lost_rows as reader_lost_rows
from ..tracer.reader import ring_window_of
from ..tracer.reader import untraced_counts
from ..tracer.schema import UNTRACED_AFTER_CLOSE
from .window import apply as apply_start
from .window import send_in_start_gap, start_cuts, window_from_seq

#: what the user can do about each reason a shard's facts end early
_RECORD = {
    "missing": "copy the shard's folder into the trace (every process that ran NIXL must be recorded)",
    "truncated": "the stream was cut mid-write; record again and let the process exit normally",
    "unclosed": "let the recorded process exit normally (a kill -9 loses what the recorder had not flushed yet)",
    "window_end": ("dump a longer tail after the trigger (kvtrace record --ring-tail DURATION), or record the "
                   "whole run without --ring"),
    "descs": "the descriptor rows of the last transfers were lost; record again and let the process exit normally",
    "gaps": "events were lost while recording (see the recorder's loss note); record again with a larger recorder backlog",
    "lost_send": "record every process that sends to this one (or let the sender exit normally)",
    "lost_descs": ("the recorder could not write some descriptor rows (its warning on stderr and shard.json "
                   "'lost' say why); record again with room for the trace"),
    "missing_descs": ("the shard's descriptor stream lacks rows, or repeats some, and nothing recorded accounts for "
                      "it (a file damaged or edited after recording: `kvtrace validate` names the transfers); "
                      "record again"),
    "repeated_seqs": ("the shard's event stream holds some seqs more than once (a writer that flushed a batch "
                      "twice, or a file damaged or merged after recording: `kvtrace validate` says where); record again"),
    "repeated_xfers": ("the writer gave two postings one transfer id (the format asks a new id for every posting, a "
                       "re-post of a handle included: `kvtrace validate` names them); record with kvtrace's recorder, "
                       "or number postings apart"),
    "untraced": ("start recording before the process creates its NIXL agent and prepares its descriptor "
                 "lists (`kvtrace record -- CMD` taps NIXL from the start)"),
}


@dataclasses.dataclass
class ShardCut:
    """What of one shard is analysed."""

    shard: str
    recorded: int                 #: events recorded (present in the streams)
    last_seq: int | None          #: last recorded seq (None: no events)
    cut: int | None = None        #: last analysed seq (None: the whole shard)
    why: list[str] = dataclasses.field(default_factory=list)   #: reasons, user text
    kinds: set[str] = dataclasses.field(default_factory=set)   #: reason keys (see _RECORD)
    #: receives elsewhere whose send this shard's ring window let go before its start (user
    #: text): its start is then known only in part, whatever its shard.json says (window.py)
    start_gap: list[str] = dataclasses.field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.cut is None and not self.kinds

    def cut_to(self, seq: int, why: str, kind: str) -> bool:
        """Lower the cut to ``seq`` (the last analysed seq); True when it moved."""
        if self.cut is not None and self.cut <= seq:
            return False
        self.cut = seq
        self.why.append(why)
        self.kinds.add(kind)
        return True


@dataclasses.dataclass
class Unknown:
    """One kind of fact the analysis cannot decide, with how many and how to record it."""

    what: str          #: user text: what is unknown
    count: int         #: how many (events, descriptor ends, ...); 0: not countable (a lost tail)
    record: str        #: the one thing to record to resolve it

    def note(self) -> str:
        n = f" ({self.count:,})" if self.count else ""
        return f"unknown: {self.what}{n} — to resolve: {self.record}"


def shard_state(trace) -> tuple[dict[str, set[str]], list[str]]:
    """Per present shard, why its recorded facts may end early (reason keys), and the
    listed shards that are missing."""
    present = {s.name for s in trace.shards}
    missing = [n for n in (trace.manifest.get("shards") or []) if n not in present]
    state: dict[str, set[str]] = {}
    for s in trace.shards:
        k = set()
        if not s.closed:
            k.add("unclosed")
        if any(st.truncated for st in s.streams.values()):
            k.add("truncated")
        if _lost_events(s) and lost_after(s) is not None:
            k.add("gaps")
        if lost_rows(s).keys() & {"descs", "dlists"}:
            k.add("lost_descs")
        if getattr(s, "first_repeated_seq", None) is not None:
            k.add("repeated_seqs")
        state[s.name] = k
    return state, missing


def _lost_events(shard) -> bool:
    """The recorder says it wrote more events than the stream holds, or counted events lost
    (seqs alone may legally jump: the format only asks them to increase)."""
    info = shard.info if isinstance(shard.info, dict) else {}
    n = shard.streams["events"].num_rows   # not .table: a stream known from the index stays unread
    wrote = info.get("events")
    lost = ((info.get("lost") or {}).get("rows") or {}) if isinstance(info.get("lost"), dict) else {}
    lost_ev = lost.get("events") if isinstance(lost, dict) else None
    return (isinstance(wrote, int) and wrote > n) or (isinstance(lost_ev, int) and lost_ev > 0)


def lost_rows(shard) -> dict[str, int]:
    """Rows per table the shard's recorder counted lost, wherever in the stream they were."""
    return reader_lost_rows(shard.info)


def untraced_postings(shard) -> dict[str, int]:
    """Postings NIXL ran that the recorder saw but could not record, by reason (shard.json
    ``untraced_postings``), leaving out those made after the shard closed: they come after
    every recorded event, so they hide nothing from the recorded part."""
    return {k: n for k, n in untraced_counts(shard.info).items() if k != UNTRACED_AFTER_CLOSE}


def untraced_unknowns(trace) -> list["Unknown"]:
    """One note per shard whose process ran transfer postings the trace does not hold: their
    bytes landed somewhere unrecorded, so no absence of a delivery (and no "whose bytes a
    page holds") is a fact there (the ``untraced`` column of shard_cut)."""
    out = []
    for s in trace.shards:
        why = untraced_postings(s)
        if why:
            reasons = "; ".join(f"{k}: {n:,}" for k, n in sorted(why.items()))
            out.append(Unknown(f"shard {s.name}: where the bytes of transfer postings NIXL ran unrecorded landed "
                               f"({reasons}): a page they filled looks undelivered, and whose bytes a page holds "
                               "cannot be told", sum(why.values()), _RECORD["untraced"]))
    return out


def shard_cut_table(trace, cuts: dict[str, "ShardCut"], missing: list[str]) -> pa.Table:
    """The table shard_cut: per shard its cut (null: the whole shard; -1: listed but missing)
    and ``untraced``, the postings its process ran that the trace lacks (untraced_postings)."""
    names = [s.name for s in trace.shards]
    untraced = [sum(untraced_postings(s).values()) for s in trace.shards]
    return pa.table({"shard": pa.array(names + list(missing), pa.string()),
                     "cut": pa.array([cuts[n].cut if n in cuts else None for n in names] + [-1] * len(missing),
                                     pa.int64()),
                     "untraced": pa.array(untraced + [0] * len(missing), pa.int64())})


def seq_break(shard) -> int | None:
    """The last seq before the shard's first seq jump or repeat, in seq order (the recorder
    numbers events contiguously, so a jump means events lost in the middle; rows stored out
    of seq order are not a loss); None: none."""
    seq = shard.streams["events"].table.column("seq")
    if len(seq) < 2 or seq.null_count:
        return None
    a = np.sort(np.asarray(seq.to_numpy(zero_copy_only=False), dtype=np.int64))
    bad = np.flatnonzero(np.diff(a) != 1)
    return int(a[bad[0]]) if len(bad) else None


def lost_after(shard) -> int | None:
    """The last seq before the shard's first missing event: at its first seq jump, or, where its
    seqs do not jump but the recorder numbered more events than the stream holds (shard.json
    ``events``: seqs 0..events-1), after its last event — the lost ones are its tail (-1: every
    event). None: no missing event is located."""
    at = seq_break(shard)
    if at is not None:
        return at
    info = shard.info if isinstance(shard.info, dict) else {}
    wrote = info.get("events")
    if not isinstance(wrote, int) or isinstance(wrote, bool):
        return None
    seq = shard.streams["events"].table.column("seq")
    if seq.null_count:
        return None
    last = int(np.asarray(seq.to_numpy(zero_copy_only=False), dtype=np.int64).max()) if len(seq) else -1
    return last if last < wrote - 1 else None


def is_complete(trace) -> bool:
    """Every listed shard present, closed, with no stream cut short, and none a ring window
    whose kept state was dropped (window.py)."""
    state, missing = shard_state(trace)
    return not missing and not any(state.values()) and not start_cuts(trace)


def silent_desc_loss(con, trace) -> dict[str, int]:
    """Per shard whose descriptor rows are not the ones posted although its recorder counted
    none lost: the first post missing some or holding one twice (its rows hold other bytes
    than it moved, or index a list not recorded). A cheap pass over per-shard totals first; the post-by-post query
    only for a shard they call into question. ``con``: DuckDB with the views ``events``,
    ``descs`` and ``dlists`` as recorded (a shard column each)."""
    from .sqltext import query_sql

    counted = {s.name for s in trace.shards if lost_rows(s).keys() & {"descs", "dlists"}}
    out = {}
    for (shard,) in con.execute(query_sql("desc_bytes_short")).fetchall():
        if shard in counted:
            continue   # compute() cuts it as counted lost
        for (seq,) in con.execute(query_sql("cut_incomplete_descs"), [shard]).fetchall():
            if seq is not None:
                out[shard] = int(seq)
    return out


def repeated_xfer_posts(con) -> dict[str, int]:
    """Per shard that posts one transfer id more than once, the first post of the earliest
    such id (the analysis ends the shard before it: which rows and completions belong to
    which posting is unknown). ``con``: DuckDB with the view ``events`` as recorded."""
    from .sqltext import query_sql

    return {str(s): int(seq) for s, seq in con.execute(query_sql("repeated_xfer_posts")).fetchall()}


def compute(model, limit: dict[str, tuple[int, str]] | None = None,
            silent: dict[str, int] | None = None,
            repeated: dict[str, int] | None = None) -> dict[str, ShardCut]:
    """The consistent cut of an incomplete trace, over the model's base views as recorded.

    ``limit``: per shard, a last seq to analyse at most and why (a live trace's time
    frontier, live.py), applied before the causal closure. ``silent``: per shard, the first
    post whose descriptor rows are missing although none were counted lost (silent_desc_loss).
    ``repeated``: per shard, the first post of a transfer id posted twice (repeated_xfer_posts).

    The pairing (``sync_pairs``) and agents' homes (``agent_home``) of the recorded events
    are built and dropped again: the analysis derives them anew from the cut events."""
    from .sqltext import query_sql

    con, trace = model.con, model.trace
    state, missing = shard_state(trace)
    for name in silent or {}:
        state.setdefault(name, set()).add("missing_descs")
    for name in repeated or {}:
        state.setdefault(name, set()).add("repeated_xfers")
    q = lambda sql, p=None: con.execute(sql, p or []).fetchall()  # noqa: E731
    last = {s: (n, m) for s, n, m in q("SELECT shard, count(*), max(seq) FROM events GROUP BY shard")}
    cuts: dict[str, ShardCut] = {}
    for s in trace.shards:
        n, m = last.get(s.name, (0, None))
        c = ShardCut(s.name, int(n), None if m is None else int(m))
        reasons = state[s.name]
        if reasons:
            end = -1 if c.last_seq is None else c.last_seq
            if "truncated" in reasons:
                lost = [f"{t}.arrows" for t, st in s.streams.items() if st.truncated]
                c.cut_to(end, f"shard {s.name}: {', '.join(lost)} cut short", "truncated")
            if "gaps" in reasons:
                at = lost_after(s)
                how = "its seqs jump there" if at == seq_break(s) else "the recorder numbered more events than it holds"
                c.cut_to(at, f"shard {s.name}: events are missing after seq {at} ({how})", "gaps")
            if "repeated_seqs" in reasons:
                # two rows with one seq: which came first, and where they stand among the
                # others, is unknown (a duplicated free would read as a double free)
                at = s.first_repeated_seq
                c.cut_to(at - 1, f"shard {s.name}: seq {at} is stored more than once, so the order of its events "
                         "from there on is unknown", "repeated_seqs")
            if "unclosed" in reasons and ring_window_of(s.info) is not None:
                c.cut_to(end, f"shard {s.name}: a flight-recorder window, which ends there", "window_end")
            elif "unclosed" in reasons:
                c.cut_to(end, f"shard {s.name}: not closed, so events after its last flush are lost", "unclosed")
            # a post whose descriptor rows (or prepared lists) did not survive: the writer
            # flushes those before the events, so only the last posts of a shard cut short
            # can lack them (a closed shard missing rows with nothing counted is cut below,
            # under its own reason)
            tail = reasons - {"missing_descs", "lost_descs", "repeated_seqs", "repeated_xfers"}
            for (seq,) in (q(query_sql("cut_lost_descs"), [s.name]) if tail else []):
                if seq is not None:
                    c.cut_to(int(seq) - 1, f"shard {s.name}: the descriptors of its transfers from seq {seq} on were lost", "descs")
            # rows the recorder counted lost can be anywhere in the stream (a write that failed
            # mid-run): the first post whose descriptors are not all there ends what is known
            if "lost_descs" in reasons:
                for (seq,) in q(query_sql("cut_incomplete_descs"), [s.name]):
                    if seq is not None:
                        c.cut_to(int(seq) - 1, f"shard {s.name}: descriptor rows of its transfer posted at seq {seq} "
                                 "were lost while recording", "lost_descs")
            if "missing_descs" in reasons:
                seq = silent[s.name]
                c.cut_to(seq - 1, f"shard {s.name}: descriptor rows of its transfer posted at seq {seq} are missing "
                         "or repeated (they hold other bytes than the post moved, skip or repeat a position of its "
                         "list, or index a prepared list not recorded; none were counted lost)", "missing_descs")
            if "repeated_xfers" in reasons:
                seq = repeated[s.name]
                c.cut_to(seq - 1, f"shard {s.name}: the transfer id posted at seq {seq} is posted again later, so which "
                         "descriptors and completions belong to which posting is unknown", "repeated_xfers")
        if limit and s.name in limit:
            c.cut_to(limit[s.name][0], limit[s.name][1], "unclosed")
        cuts[s.name] = c
    model.derive(["sync_pairs", "agent_home"])
    try:
        pairs = con.execute("SELECT send_shard, send_seq, recv_shard, recv_seq FROM sync_pairs "
                            "WHERE send_shard <> recv_shard").fetchnumpy()
        unpaired = q(query_sql("cut_unpaired_recv"))
        homes = dict(q("SELECT agent, h_shard FROM agent_home"))
    finally:
        for name in ("sync_pairs", "agent_home"):
            con.execute(f"DROP TABLE IF EXISTS {name}")
            model._built.discard(name)
    incomplete = bool(missing) or any(state.values())
    # receives whose sender's facts may be lost: its home shard is incomplete, or it has
    # no home and some shard is missing or incomplete
    starts = start_cuts(trace)
    for shard, seq, peer, t_ns in unpaired:
        home = homes.get(peer)
        lost = (state.get(home) if home is not None else incomplete)
        if lost and home is not None and send_in_start_gap(trace, home, shard, t_ns):
            # the sender is a ring window recorded up to after this receive: the send lies
            # before its window, not in a lost tail. A window whose kept state is complete
            # let it go all the same (each process decides alone which requests finished
            # before the window's cut): its start is known only in part too. window.py keeps
            # the facts that depend on what is unknown there out of the checks.
            if home in starts:
                continue
            if home in cuts and state.get(home, set()) <= {"unclosed"}:
                # nothing lost inside the window either, so the send is before it
                cuts[home].start_gap.append(f"shard {shard} received at seq {seq} what {peer} sent before it")
                continue
        if lost and shard in cuts:
            where = ((f"events shard {home} lost while recording" if "gaps" in state.get(home, ()) else f"shard {home}'s lost tail")
                     if home else (f"missing shard {', '.join(missing)}" if missing else "an unrecorded sender"))
            cuts[shard].cut_to(int(seq) - 1, f"shard {shard}: from seq {seq} on it received from {peer} what was sent in {where}", "lost_send")
    _close(cuts, pairs)
    return cuts


def _close(cuts: dict[str, ShardCut], pairs) -> None:
    """Lower cuts until every receive inside one has its send inside another."""
    names = list(cuts)
    ix = {n: i for i, n in enumerate(names)}
    if not len(pairs["send_seq"]):
        return
    ss = np.array([ix.get(s, -1) for s in pairs["send_shard"]])
    rs = np.array([ix.get(s, -1) for s in pairs["recv_shard"]])
    sq = np.asarray(pairs["send_seq"], dtype=np.int64)
    rq = np.asarray(pairs["recv_seq"], dtype=np.int64)
    ok = (ss >= 0) & (rs >= 0)
    ss, rs, sq, rq = ss[ok], rs[ok], sq[ok], rq[ok]
    big = np.iinfo(np.int64).max
    while True:
        cut = np.array([big if cuts[n].cut is None else cuts[n].cut for n in names], dtype=np.int64)
        bad = (sq > cut[ss]) & (rq <= cut[rs])
        if not bad.any():
            return
        for k in np.unique(rs[bad]):
            first = int(rq[bad & (rs == k)].min())
            sender = names[int(ss[bad & (rs == k) & (rq == first)][0])]
            cuts[names[k]].cut_to(first - 1, f"shard {names[k]}: from seq {first} on it received what shard {sender} sent after its cut", "lost_send")


def unknowns(cuts: dict[str, ShardCut], missing: list[str]) -> list[Unknown]:
    """The notes for what the cut leaves unknown: events not analysed, per shard and reason."""
    out = []
    for name in missing:
        out.append(Unknown(f"shard {name} is listed in the manifest but missing: every fact of its agents "
                           f"(allocations, reads, completions) and everything it sent", 0, _RECORD["missing"]))
    for c in cuts.values():
        if not c.kinds:
            continue
        beyond = 0 if c.last_seq is None or c.cut is None else max(0, c.last_seq - c.cut)
        kind = next(k for k in ("lost_send", "descs", "lost_descs", "missing_descs", "repeated_seqs", "repeated_xfers",
                                "gaps", "truncated", "unclosed", "window_end")
                    if k in c.kinds)
        what = (f"shard {c.shard}: what happened after its last recorded event"
                if beyond == 0 else f"shard {c.shard}: {beyond:,} recorded events after seq {c.cut} are not analysed")
        out.append(Unknown(f"{what} ({'; '.join(_dedupe(c.why))})", beyond, _RECORD[kind]))
    return out


def _dedupe(xs: list[str]) -> list[str]:
    seen, out = set(), []
    for x in xs:
        key = x.split(": ", 1)[-1]
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def apply(model) -> tuple[dict[str, ShardCut], list[Unknown]]:
    """Point the model's ``events`` and ``descs`` at the cut prefix of an incomplete trace
    (``recorded_events``, ``recorded_descs`` keep every recorded row); a complete trace is
    left as it is. Returns the cuts and what they leave unknown."""
    from .index import scan_paths
    from .sqltext import query_sql

    trace, con = model.trace, model.con
    silent = silent_desc_loss(con, trace)   # rows gone without a trace of why: not "not sent"
    repeated = repeated_xfer_posts(con)     # two postings under one id: not one transfer
    if is_complete(trace) and not silent and not repeated:
        return {}, untraced_unknowns(trace)
    cuts = compute(model, silent=silent, repeated=repeated)
    missing = shard_state(trace)[1]
    for t in ("events", "descs"):
        con.read_parquet(scan_paths(trace, model.index_dir, t)).create_view(f"recorded_{t}")
    # a listed shard that never arrived is cut before its first event (-1): checks that reason
    # from the absence of facts anywhere (a delivery, a write) see that some are missing
    con.from_arrow(shard_cut_table(trace, cuts, missing)).create("shard_cut")
    con.execute(query_sql("cut_events"))
    con.execute(query_sql("cut_descs"))
    return cuts, unknowns(cuts, missing) + start_unknowns(model, cuts) + untraced_unknowns(trace)


def start_unknowns(model, cuts: dict[str, ShardCut]) -> list[Unknown]:
    """Shards cut at their start (a ring window whose kept state was dropped, or one that let
    go of what a receive elsewhere was sent by: ``ShardCut.start_gap``): leave what depends
    on their unknown past out of ``events`` and ``descs`` (window.py); its notes."""
    starts = start_cuts(model.trace)
    gaps = {n: c.start_gap for n, c in cuts.items() if c.start_gap and n not in starts}
    for name in gaps:
        starts[name] = window_from_seq(model.trace, name)
    return [Unknown(*u) for u in apply_start(model, starts, gaps)] if starts else []


def ordering_unknowns(model) -> list[Unknown]:
    """Descriptor ends whose request's holding is unknown (the transfer carries no request,
    or the allocation is not ordered with the post, or lies past a cut), one note per
    (agent, initiator, reason)."""
    model.derive(["end_hold", "shard_order"])
    out = []
    for r in model.ask("unknown_ends").to_pylist():
        n, who, src = r["transfers"], r["agent"], r["initiator"]
        if r["why"] == "no_request":
            what = (f"which request's pages {n:,} transfer(s) posted from shard {src} moved on {who}: "
                    "the posts carry no request")
            rec = ("record the request with each post (a notification tag kvtrace can parse, or the "
                   "request hooks): see docs/hooks.md")
        elif r["why"] == "unordered":
            what = (f"whether {n:,} transfer(s) posted from shard {src} touched slots their request held on {who}: "
                    f"none of {r['home']}'s events (its allocations) is ordered before those posts")
            rec = (f"record the destination-pages message from {who} to the sender (msg_send / msg_recv "
                   "with a shared detail.id): see docs/hooks.md")
        else:
            what = (f"whether {n:,} transfer(s) posted from shard {src} touched slots their request held on {who}: "
                    f"the allocation is not ordered with the post, or lies past shard {r['home']}'s cut")
            rec = ("record the message that names the slots before each post (msg_send / msg_recv with a "
                   "shared detail.id): see docs/hooks.md")
        out.append(Unknown(what, int(r["n"]), rec))
    model.derive(["desc_match", "managed"])
    for r in model.ask("allocs_elsewhere").to_pylist():
        what = (f"whether the slots of {r['agent']}'s pool {r['pool']} were held when transfers and reads "
                f"touched them: their allocations are recorded by shard {r['recorded_on']}, another process "
                f"than {r['home']} where {r['agent']}'s transfers are, and are not ordered with them; "
                "ownership checks skip that pool")
        rec = (f"record the alloc/free of those slots in {r['home']}'s process too (e.g. the block ids the "
               "scheduler hands the worker each step): see docs/hooks.md")
        out.append(Unknown(what, int(r["n"]), rec))
    for r in model.ask("unheld_descs").to_pylist():
        what = (f"whether {r['transfers']:,} transfer(s) posted from shard {r['initiator']} copied the same "
                f"(pool, layer, page) of their {r['requests']:,} request(s) on {r['agent']}: no allocation of "
                f"those requests was recorded on {r['agent']} in its own process, so which pages they hold "
                "there is unknown")
        rec = (f"record the allocator's alloc/free events on {r['agent']} (the allocator hooks, in the "
               "process that hands out its pages): see docs/hooks.md")
        out.append(Unknown(what, int(r["n"]), rec))
    return out
