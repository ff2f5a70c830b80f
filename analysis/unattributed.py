"""Findings on transfers that carry no request (an engine that posts without a request in
its notification tags, or tags kvtrace cannot parse).

Which request's pages such a transfer moved is unknown, so a finding on it is not proof
that some request's data went wrong: it becomes a warning, grouped by the agent whose
memory it touches, the notification tag and the pool, with a sentence saying which bytes, which
transfer and which peer — and the verdict never supports a hypothesis from these alone.
"""
from __future__ import annotations

import importlib.resources

from .findings import Finding, catalog


def _sql() -> str:
    return importlib.resources.files("kvtrace.analysis.sql").joinpath("unattributed_xfers.sql").read_text()


def regroup(session, findings: list[Finding]) -> list[Finding]:
    """Findings with no request that involve a transfer posted without one, grouped per
    (check, agent, tag, pool) into one readable warning each (per pool: the warning's pool,
    slot and slots are that pool's); the others unchanged."""
    loose = [f for f in findings if f.request is None]
    if not loose:
        return findings
    posts = {(r["shard"], r["post_seq"]): r for r in session.query(_sql()).to_pylist()}
    if not posts:
        return findings
    groups: dict[tuple, list[tuple[Finding, dict]]] = {}
    keep = []
    for f in findings:
        xs = [posts[e] for e in f.events if e in posts] if f.request is None else []
        if not xs:
            keep.append(f)
            continue
        groups.setdefault((f.check, f.agent, xs[0]["tag"], f.pool), []).append((f, xs[0]))
    cat = catalog()
    for (check, agent, tag, _pool), members in groups.items():
        f0, x = members[0]
        n = sum(f.count for f, _ in members)
        summary = cat[check].summary if check in cat else check
        tagtxt = f"notification tag {tag!r}" if tag is not None else "no notification tag"
        where = f" of {agent}" if agent else ""
        msg = (f"{len(members)} finding(s) ({n} instance(s)) on transfers with no request ({tagtxt}): {summary}"
               f" — e.g. transfer {x['xfer']} posted by {x['agent']} to {x['peer']} ({x['op']}, {x['ndesc']} "
               f"descriptor(s), {x['nbytes'] or 0:,} bytes{where}). Whose pages these are is unknown, so this is not "
               "proof that a request's data went wrong: record the request with each post (see docs/hooks.md).")
        events = []
        slots: list[int] = []
        for f, _ in members:
            events += [e for e in f.events if e not in events]
            slots += [s for s in f.slots if s not in slots]
        keep.append(Finding(check=check, severity="warning", agent=agent, request=None, pool=f0.pool,
                            layer=f0.layer, slot=f0.slot, events=events[:8], count=n, message=msg,
                            slots=sorted(slots),
                            extra={"unattributed": True, "tag": tag, "transfer": [x["shard"], x["xfer"]],
                                   "peer": x["peer"], "findings": len(members)}))
    return keep
