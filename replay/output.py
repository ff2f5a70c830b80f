"""Write a run as a trace in the same format (so check, sql and tui read a replay too).

Every program event is re-emitted in schedule order in its own shard (and thread); each
move becomes a ``move`` event (initiator's shard, ``xfer`` of its transfer); reads carry
the checksums the replay observed (the recorded ones in ``detail.recorded_checksums``
when they differ); writes carry the checksums of what replay wrote. ``t_ns`` is the
step number — a logical clock, so two runs of one schedule give identical traces.
"""
from __future__ import annotations

import collections
import json

import numpy as np

from ..errors import TraceError
from ..tracer import manifest as _manifest
from ..tracer.recorder import Recorder

_EVENT_FIELDS = ("pool", "layer", "slots", "pages", "checksums", "xfer", "peer", "addr", "nbytes",
                 "mem_type", "device", "msg", "status", "detail")


def write_trace(out: str, graph, result, executor, verdict, manifest: dict) -> str:
    """Write ``result`` of ``graph`` as trace ``out``; returns its path."""
    g, col = graph, graph.col
    shards = list(dict.fromkeys(col["shard"])) or ["main"]
    recs = {s: Recorder(out, s, flush_interval=3600) for s in shards}
    for s, rec in recs.items():
        for r in g.layouts_tables.get(s, _empty()).to_pylist():
            rec.layout(r["agent"], r["pool"], r["layer"], r["addr"], r["slot_bytes"], r["num_slots"],
                       page_tokens=r["page_tokens"], dtype=r["dtype"], part=r.get("part"),
                       mem_type=r.get("mem_type") or "DRAM", device=r.get("device") or 0,
                       nbytes=r["nbytes"], from_seq=r.get("from_seq"))
        dl = g.dlists_tables.get(s)
        if dl is not None and dl.num_rows:
            groups = collections.defaultdict(list)
            for r in dl.to_pylist():
                groups[r["dlist"]].append(r)
            for did, rows in groups.items():
                rows.sort(key=lambda r: r["idx"])
                rec.dlist_array(did, rows[0]["agent"], rows[0]["remote_agent"], [r["addr"] for r in rows],
                                np.asarray([r["nbytes"] for r in rows]), device=rows[0]["device"] or 0,
                                mem_type=rows[0].get("mem_type"))
    descs = collections.defaultdict(list)
    for s, t in g.descs_tables.items():
        for r in t.to_pylist():
            descs[(s, r["xfer"])].append(r)
    bad = collections.defaultdict(set)
    for b in verdict.corrupted:
        bad[b.op].add(b.slot)
    stale = set(verdict.stale_moves)
    for step, op in enumerate(result.order):
        if op >= g.n_prog:
            _move(recs, g, op, step, op in stale)
            continue
        s = col["shard"][op]
        rec = recs[s]
        kind = col["kind"][op]
        f = {k: col[k][op] for k in _EVENT_FIELDS}
        if kind == "xfer_post":
            _descs(rec, descs.get((s, col["xfer"][op]), []))
        elif kind == "write" and op in result.writes:
            f["checksums"] = executor.checksums(op, result.writes[op])
        elif kind == "read" and op in result.reads:
            seen = executor.checksums(op, result.reads[op])
            rec_cs = col["checksums"][op]
            d = json.loads(f["detail"]) if f["detail"] else {}
            if rec_cs and list(rec_cs) != list(seen):
                d["recorded_checksums"] = [None if c is None else str(c) for c in rec_cs]
            if op in bad:
                d["corrupted_slots"] = sorted(bad[op])
            f["checksums"] = seen
            f["detail"] = d or None
        if f["checksums"] is not None and any(c is None for c in f["checksums"]):
            f["checksums"] = [0 if c is None else c for c in f["checksums"]]
        # replay writes from one Python thread but keeps the recorded thread column
        rec.pin_thread(col["thread"][op])
        rec.event(kind, col["agent"][op], col["request"][op], t_ns=step + 1, **f)
    for rec in recs.values():
        rec.close()
    _manifest.finish(out, **manifest)
    return out


def _empty():
    from ..tracer.schema import empty_table
    return empty_table("layouts")


def _descs(rec: Recorder, rows: list) -> None:
    if not rows:
        return
    rows = sorted(rows, key=lambda r: r["pos"])
    r0 = rows[0]
    for side in ("src", "dst"):   # one posting: every descriptor from the same list, or none from one
        odd = next((r for r in rows if (r[f"{side}_dlist"], r[f"{side}_idx"] is None)
                    != (r0[f"{side}_dlist"], r0[f"{side}_idx"] is None)), None)
        if odd is not None:
            raise TraceError(f"transfer {r0['xfer']} mixes descriptors of different {side} lists (positions "
                             f"{r0['pos']} and {odd['pos']}): one NIXL posting takes all from one prepared list or none")
    col = lambda k: [r[k] for r in rows]  # noqa: E731
    idx = lambda k: None if r0[k] is None else col(k)  # noqa: E731
    rec.descs_array(r0["xfer"], r0["op"], r0["src_agent"], r0["dst_agent"], col("src_addr"), col("dst_addr"),
                    np.asarray(col("nbytes"), np.uint64), src_device=np.asarray([r["src_device"] or 0 for r in rows]),
                    dst_device=np.asarray([r["dst_device"] or 0 for r in rows]), src_dlist=r0["src_dlist"],
                    src_idx=idx("src_idx"), dst_dlist=r0["dst_dlist"], dst_idx=idx("dst_idx"))


def _move(recs, g, op: int, step: int, stale: bool) -> None:
    t = g.transfers[g.move_xfer[op - g.n_prog]]
    pieces = g.move_pieces[op - g.n_prog]
    d = {"chunk": t.chunks.index(op), "chunks": len(t.chunks)}
    if stale:
        d["src_changed_since_post"] = True
    rec = recs[t.shard]
    rec.pin_thread(0)
    rec.event("move", t.agent, t.request, xfer=t.xfer, peer=t.peer, nbytes=sum(p[4] for p in pieces),
              t_ns=step + 1, detail=d)
