"""Who wrote these bytes: for every corrupted read, the recorded write whose checksum it
holds and the transfer that carried it there — from checksums alone (no provenance tags).

A read is corrupted when it differs from what the data flow predicts (the
checksum_mismatch check), saw never-written memory, or holds bytes written for another
page (sql/attribution.sql says exactly how). Usage::

    rows = attribute(session)          # list[Attribution], cached on the session
    attach(findings, rows)             # each finding gets extra["attribution"] (its requests')
"""
from __future__ import annotations

import dataclasses

from .export_sql import load_sql

#: attributions kept per finding (the full list is in the check's JSON and the report)
PER_FINDING = 5


@dataclasses.dataclass
class Attribution:
    """One corrupted read (one slot layer of one read event) and whose bytes it holds."""

    agent: str
    shard: str
    seq: int
    request: str | None
    pool: str
    layer: int
    slot: int
    page: int | None
    why: str                    #: flow | poison | page | unwritten (see sql/attribution.sql)
    kind: str                   #: write | poison | unknown
    origin: dict | None         #: the origin write: agent, shard, seq, request, pool, layer, slot, page
    local: bool                 #: the origin write is on the read's own slot layer
    carrier: dict | None        #: the transfer that carried it: shard, xfer, post_seq, request
    predicted: tuple[str, int] | None  #: the event the data flow predicted the bytes from
    via: str | None = None      #: write | xfer: what that event is
    message: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _page(pool, layer, page) -> str:
    return f"{pool} L{layer}" + (f" page {page}" if page is not None else "")


def describe(a: Attribution, partial: bool = False) -> str:
    """The sentence: what was read, whose bytes it holds, written where, moved by what.
    ``partial``: the trace is cut (model.cut: a shard ends early or starts mid-run), so the
    write or transfer the analysed facts lack may be among those not analysed."""
    head = f"{a.agent} read request {a.request} {_page(a.pool, a.layer, a.page)} (slot {a.slot}) at {a.shard}:{a.seq}"
    if a.kind == "poison":
        body = "it holds never-written memory (poison): bytes never written by any recorded writer"
    elif a.kind == "unknown" and partial:
        body = "it holds bytes no write in the analysed part of this partial trace holds (see the unknown notes)"
    elif a.kind == "unknown":
        body = "it holds bytes never written by any recorded writer"
    else:
        o = a.origin
        whose = "its own" if o["request"] == a.request else f"request {o['request']}'s"
        body = f"it holds {whose} {_page(o['pool'], o['layer'], o['page'])}, written at {o['shard']}:{o['seq']}"
        if a.local:
            body += " on this slot"
        elif a.carrier:
            c = a.carrier
            by = "" if c["request"] == a.request else f" (request {c['request']}'s transfer)"
            body += f" (slot {o['slot']}) and moved by x{c['xfer']}{by}, posted at {c['shard']}:{c['post_seq']}"
        else:
            body += (f" (slot {o['slot']}); no analysed transfer of this partial trace carried it into this slot"
                     if partial else f" (slot {o['slot']}); no recorded transfer carried it into this slot")
    if a.why == "flow" and a.predicted:
        what = "written at" if a.via == "write" else "carried by the transfer posted at"
        body += f"; the data flow predicts the bytes {what} {a.predicted[0]}:{a.predicted[1]}"
    return f"{head}; {body}."


def attribute(session) -> list[Attribution]:
    """Every corrupted read of the trace with its origin (empty without read/write checksums)."""
    cached = getattr(session, "_attribution", None)
    if cached is not None:
        return cached
    session.derive()
    caps = session.capabilities()
    out: list[Attribution] = []
    if caps.get("reads") and caps.get("writes") and caps.get("checksums"):
        for r in session.query(load_sql("attribution")).to_pylist():
            origin = None if r["o_seq"] is None else {
                "agent": r["o_agent"], "shard": r["o_shard"], "seq": int(r["o_seq"]), "request": r["o_request"],
                "pool": r["o_pool"], "layer": r["o_layer"], "slot": r["o_slot"], "page": r["o_page"]}
            carrier = None if r["xfer"] is None else {
                "shard": r["x_shard"], "xfer": int(r["xfer"]), "post_seq": int(r["x_post"]), "request": r["x_request"]}
            a = Attribution(r["agent"], r["shard"], int(r["seq"]), r["request"], r["pool"], r["layer"], r["slot"],
                            r["page"], r["why"], r["kind"], origin, bool(r["local"]), carrier,
                            None if r["p_seq"] is None else (r["p_shard"], int(r["p_seq"])), r["via"])
            a.message = describe(a, bool(getattr(session, "cuts", None)))
            out.append(a)
    session._attribution = out
    return out


def _requests(a: Attribution) -> set:
    return {a.request, (a.origin or {}).get("request"), (a.carrier or {}).get("request")} - {None}


def attach(findings, attributions: list[Attribution]) -> None:
    """Give each finding the attributions of the corrupted reads it concerns: reads of its
    request, or bytes its request wrote or carried (a late write landing in the next owner)."""
    if not attributions:
        return
    by_req: dict[str, list[Attribution]] = {}
    for a in attributions:
        for q in _requests(a):
            by_req.setdefault(q, []).append(a)
    for f in findings:
        mine = by_req.get(f.request) or []
        if mine:
            f.extra["attribution"] = [a.message for a in mine[:PER_FINDING]]
            f.extra["attributed_reads"] = len(mine)


def summary(attributions: list[Attribution], limit: int = 12) -> list[tuple[int, str]]:
    """(count, example sentence) per (reader, request, whose bytes, carrier request), most first."""
    groups: dict[tuple, list[Attribution]] = {}
    for a in attributions:
        key = (a.agent, a.request, a.kind, (a.origin or {}).get("request"), (a.carrier or {}).get("request"), a.local)
        groups.setdefault(key, []).append(a)
    rows = sorted(groups.values(), key=lambda g: (-len(g), g[0].shard, g[0].seq))
    return [(len(g), g[0].message) for g in rows[:limit]]
