"""Timeline model shared by the Perfetto and Chrome JSON exporters.

A trace becomes processes (one per agent) holding tracks: one per recorded thread
(program events as zero-length slices), transfer lanes (post → completion slices,
packed so slices on a lane never overlap), request lanes (req_start → done/abort),
per-pool slot-occupancy counters and a findings track. Flows connect a transfer to the
target's notification and to the reads that consumed its data, notif_send to
notif_recv, and msg_send to msg_recv. Times are ns since the earliest event of the
trace (every shard's clock is the same host's monotonic clock in practice); each
track's times are made non-decreasing in program order.
"""
from __future__ import annotations

import collections
import dataclasses
import json

from .export_findings import findings_and_verdict
from .export_occupancy import occupancy_series
from .export_sql import load_sql

#: event kinds drawn as transfer slices or request lanes instead of thread points
_SPAN_KINDS = {"xfer_post", "xfer_done", "xfer_error", "xfer_release", "req_start", "req_done", "req_abort"}
TID_FINDINGS, TID_XFER, TID_THREAD, TID_COUNTER = 1, 100, 1000, 10000


@dataclasses.dataclass
class Track:
    """One timeline row inside an agent's process."""
    uid: int
    agent: str
    name: str
    kind: str     # thread | xfer | request | counter | findings
    tid: int


@dataclasses.dataclass
class Slice:
    """A span (dur > 0) or a point (dur == 0) on a track, with flow ends attached."""
    track: int
    ts: int
    dur: int
    name: str
    cat: str
    args: dict
    flows_out: list = dataclasses.field(default_factory=list)
    flows_in: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Timeline:
    """Everything an exporter writes; ``pid`` of an agent is its index + 1."""
    agents: list
    tracks: dict
    slices: list
    counters: list    # (track uid, ts, value)
    flows: dict       # flow id -> (src slice index, dst slice index)
    verdict: str
    t0: int

    def pid(self, agent: str) -> int:
        return self.agents.index(agent) + 1


def _msg_text(b) -> str | None:
    if b is None:
        return None
    try:
        return b.decode()
    except UnicodeDecodeError:
        return b.hex()


def _lanes(spans: list) -> list[int]:
    """Greedy interval packing: lane index per (start, end) so lanes never overlap."""
    order = sorted(range(len(spans)), key=lambda i: spans[i])
    ends, lane = [], [0] * len(spans)
    for i in order:
        s, e = spans[i]
        for k, last in enumerate(ends):
            if last <= s:
                ends[k], lane[i] = e, k
                break
        else:
            ends.append(e)
            lane[i] = len(ends) - 1
    return lane


class _Builder:
    def __init__(self):
        self.tracks, self.slices, self.counters, self.flows = {}, [], [], {}
        self._by_key: dict = {}

    def track(self, agent: str, name: str, kind: str, tid: int) -> int:
        key = (agent, kind, tid)
        if key not in self._by_key:
            uid = len(self.tracks) + 1
            self.tracks[uid] = Track(uid, agent, name, kind, tid)
            self._by_key[key] = uid
        return self._by_key[key]

    def add(self, s: Slice) -> int:
        self.slices.append(s)
        return len(self.slices) - 1

    def flow(self, src: int | None, dst: int | None) -> None:
        if src is None or dst is None or src == dst:
            return
        fid = len(self.flows) + 1
        self.flows[fid] = (src, dst)
        self.slices[src].flows_out.append(fid)
        self.slices[dst].flows_in.append(fid)


def shard_origins(session, ev: dict, t0: int) -> dict:
    """Per-shard time origin: the trace's first event when every shard has the same
    clock (one host's monotonic clock), else each shard's own first event — clocks of
    different hosts are not comparable, so each starts at zero."""
    clocks = {s.name: s.info.get("clock") for s in session.trace.shards}
    if len(set(clocks.values())) <= 1:
        return collections.defaultdict(lambda: t0)
    first: dict = {}
    for sh, t in zip(ev["shard"], ev["t_ns"]):
        if t is not None and (sh not in first or t < first[sh]):
            first[sh] = t
    return collections.defaultdict(lambda: t0, first)


def build_timeline(session, with_findings: bool = True) -> Timeline:
    """Build the timeline of a :class:`TraceSession` (checks run when ``with_findings``)."""
    ev = session.query(
        "SELECT shard, seq, t_ns, coalesce(thread, 0) AS thread, coalesce(agent, shard) AS agent, kind, "
        "request, pool, layer, len(slots) AS nslots, slots[1:8] AS slots, xfer, peer, nbytes, status, msg, "
        "detail FROM events ORDER BY shard, seq").to_pydict()
    n = len(ev["seq"])
    known = [t for t in ev["t_ns"] if t is not None]
    t0 = min(known) if known else 0
    base = shard_origins(session, ev, t0)
    agents = sorted(set(ev["agent"]))
    b = _Builder()
    at: dict = {}        # (shard, seq) -> slice index (point or span standing for the event)
    times: dict = {}     # (shard, seq) -> monotonic ts
    last: dict = {}      # (shard, thread) -> last ts (program order is per thread)
    t_end = 0
    for i in range(n):
        key, th = (ev["shard"][i], ev["seq"][i]), (ev["shard"][i], ev["thread"][i])
        raw = ev["t_ns"][i]
        ts = max(last.get(th, 0), (raw - base[key[0]]) if raw is not None else last.get(th, 0))
        last[th], times[key], t_end = ts, ts, max(t_end, ts)
        kind = ev["kind"][i]
        if kind in _SPAN_KINDS:
            continue
        tr = b.track(ev["agent"][i], f"thread {ev['thread'][i]}", "thread", TID_THREAD + ev["thread"][i])
        name = kind if ev["pool"][i] is None else f"{kind} {ev['pool'][i]}" + (
            f"[{ev['layer'][i]}]" if ev["layer"][i] is not None else "")
        args = {k: ev[k][i] for k in ("request", "pool", "layer", "nslots", "slots", "peer", "nbytes", "status")
                if ev[k][i] is not None}
        args.update(shard=key[0], seq=key[1])
        if ev["msg"][i] is not None:
            args["msg"] = _msg_text(ev["msg"][i])
        if ev["detail"][i]:
            args["detail"] = ev["detail"][i]
        at[key] = b.add(Slice(tr, ts, 0, name, kind, args))

    xf = session.query(load_sql("export_xfers")).to_pydict()
    spans = []
    for i in range(len(xf["xfer"])):
        s = times.get((xf["shard"][i], xf["post_seq"][i]), 0)
        e = times.get((xf["shard"][i], xf["end_seq"][i]), t_end) if xf["end_seq"][i] is not None else t_end
        spans.append((s, max(s, e)))
    by_agent: dict = {}
    for i, sp in enumerate(spans):
        by_agent.setdefault(xf["agent"][i], []).append(i)
    xslice: dict = {}
    for agent, idx in by_agent.items():
        lanes = _lanes([spans[i] for i in idx])
        for i, lane in zip(idx, lanes):
            tr = b.track(agent, f"transfers #{lane}", "xfer", TID_XFER + lane)
            s, e = spans[i]
            args = {k: xf[k][i] for k in ("shard", "xfer", "request", "peer", "op", "ndescs", "nbytes", "end_kind")}
            args["msg"] = _msg_text(xf["msg"][i])
            if xf["end_kind"][i] is None:
                args["end_kind"] = "never observed complete"
            name = f"{xf['op'][i] or 'xfer'} {xf['request'][i] or ''} → {xf['peer'][i]}".replace("  ", " ")
            j = b.add(Slice(tr, s, e - s, name, "xfer", args))
            xslice[(xf["shard"][i], xf["xfer"][i])] = j
            at[(xf["shard"][i], xf["post_seq"][i])] = j

    rq = session.query(load_sql("export_requests")).to_pydict()
    rspans = []
    for i in range(len(rq["request"])):
        s = times.get((rq["shard"][i], rq["start_seq"][i]), 0)
        e = times.get((rq["shard"][i], rq["end_seq"][i]), t_end) if rq["end_seq"][i] is not None else t_end
        rspans.append((s, max(s, e)))
    by_agent = {}
    for i in range(len(rspans)):
        by_agent.setdefault(rq["agent"][i] or rq["shard"][i], []).append(i)
    for agent, idx in by_agent.items():
        for i, lane in zip(idx, _lanes([rspans[i] for i in idx])):
            tr = b.track(agent, f"requests #{lane}", "request", lane)
            s, e = rspans[i]
            b.add(Slice(tr, s, e - s, rq["request"][i] or "?", "request",
                        {"request": rq["request"][i], "outcome": rq["outcome"][i], "shard": rq["shard"][i]}))

    session.derive(["sync_pairs", "desc_end"])   # flows are the model's pairs and descriptor ends
    for sql in ("export_notif_flows", "export_msg_flows"):
        fl = session.query(load_sql(sql)).to_pydict()
        for i in range(len(fl["src_seq"])):
            b.flow(at.get((fl["src_shard"][i], fl["src_seq"][i])), at.get((fl["dst_shard"][i], fl["dst_seq"][i])))
    fl = session.query(load_sql("export_read_flows")).to_pydict()
    for i in range(len(fl["xfer"])):
        b.flow(xslice.get((fl["src_shard"][i], fl["xfer"][i])), at.get((fl["dst_shard"][i], fl["dst_seq"][i])))

    for k, ((agent, pool), series) in enumerate(sorted(occupancy_series(session, times).items())):
        tr = b.track(agent, f"slots {pool}", "counter", TID_COUNTER + k)
        b.counters.extend((tr, ts, v) for ts, v in series)

    findings, verdict = findings_and_verdict(session) if with_findings else ([], "not checked")
    for f in findings:
        evs = [tuple(e) for e in (f.get("events") or [])]
        ts = min((times[e] for e in evs if e in times), default=t_end)
        agent = f.get("agent") or (agents[0] if agents else "trace")
        if agent not in agents:
            agents.append(agent)
        tr = b.track(agent, "findings", "findings", TID_FINDINGS)
        args = {k: v for k, v in f.items() if v is not None and k != "events"}
        args["events"] = json.dumps(evs[:20])
        b.add(Slice(tr, ts, 0, f"{f.get('severity', 'error')}: {f.get('check')}", "finding", args))
    for tr in b.tracks.values():
        if tr.agent not in agents:
            agents.append(tr.agent)
    return Timeline(agents, b.tracks, b.slices, b.counters, b.flows, verdict, t0)
