"""Chrome JSON (Trace Event Format) writer; opens in Perfetto UI and chrome://tracing.

One process per agent; each track is a thread (its tid from the model) except request
lanes, written as async ``b``/``e`` pairs. Flows use the v1 ``s``/``f`` events so one
transfer can point at several targets: ``s`` sits inside the transfer slice, ``f`` at
the target's timestamp with ``"bp": "e"`` (bind to the enclosing slice).
Timestamps are microseconds with ns precision (3 decimals).
"""
from __future__ import annotations

import json

from .export_model import Timeline


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


def _clean(args: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in args.items()}


def chrome_events(tl: Timeline) -> list[dict]:
    """The ``traceEvents`` list, sorted per (pid, tid) by time."""
    out: list[dict] = []
    for agent in tl.agents:
        out.append({"ph": "M", "name": "process_name", "pid": tl.pid(agent), "tid": 0, "args": {"name": agent}})
    for tr in tl.tracks.values():
        if tr.kind != "request":
            out.append({"ph": "M", "name": "thread_name", "pid": tl.pid(tr.agent), "tid": tr.tid,
                        "args": {"name": tr.name}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": tl.pid(tr.agent), "tid": tr.tid,
                        "args": {"sort_index": tr.tid}})
    body: list[dict] = []
    for i, s in enumerate(tl.slices):
        tr = tl.tracks[s.track]
        pid = tl.pid(tr.agent)
        if tr.kind == "request":
            aid = f"{tr.agent}/{s.name}/{i}"
            body.append({"ph": "b", "cat": "request", "name": s.name, "id": aid, "pid": pid, "tid": 0,
                         "ts": _us(s.ts), "args": _clean(s.args)})
            body.append({"ph": "e", "cat": "request", "name": s.name, "id": aid, "pid": pid, "tid": 0,
                         "ts": _us(s.ts + s.dur)})
            continue
        if s.cat == "finding":
            body.append({"ph": "i", "s": "t", "cat": "finding", "name": s.name, "pid": pid, "tid": tr.tid,
                         "ts": _us(s.ts), "args": _clean(s.args)})
            continue
        body.append({"ph": "X", "cat": s.cat, "name": s.name, "pid": pid, "tid": tr.tid, "ts": _us(s.ts),
                     "dur": _us(s.dur), "args": _clean(s.args)})
    for fid, (a, b) in tl.flows.items():
        sa, sb = tl.slices[a], tl.slices[b]
        ta, tb = tl.tracks[sa.track], tl.tracks[sb.track]
        body.append({"ph": "s", "cat": "flow", "name": "data", "id": fid, "pid": tl.pid(ta.agent),
                     "tid": ta.tid, "ts": _us(sa.ts + sa.dur // 2)})
        body.append({"ph": "f", "bp": "e", "cat": "flow", "name": "data", "id": fid, "pid": tl.pid(tb.agent),
                     "tid": tb.tid, "ts": _us(sb.ts + sb.dur // 2)})
    for uid, ts, v in tl.counters:
        tr = tl.tracks[uid]
        body.append({"ph": "C", "name": tr.name, "pid": tl.pid(tr.agent), "tid": tr.tid, "ts": _us(ts),
                     "args": {"occupied": v}})
    # X before s/f at equal times so a flow point binds to the slice it sits in
    rank = {"X": 0, "b": 0, "i": 1, "C": 1, "s": 2, "f": 2, "e": 3}
    body.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], rank[e["ph"]]))
    return out + body


def write_chrome_json(tl: Timeline, path: str, meta: dict | None = None) -> int:
    """Write the timeline as Chrome JSON; returns the number of trace events."""
    events = chrome_events(tl)
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"generator": "kvtrace export", "verdict": tl.verdict, "t0_ns": tl.t0, **(meta or {})}}
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    return len(events)
