"""Findings and the check catalog: every check is one ``sql/<name>.sql`` file.

A check file starts with a header the runner reads::

    -- check: src_free_before_done
    -- severity: error
    -- needs: slots, descs            (capabilities; missing ones skip the check, with why)
    -- summary: one line for tables and --explain
    -- explain: free text, continued on following "--   " lines

and ends in one SELECT whose rows are findings with the columns severity, agent, request,
pool, layer, slot, slots, events, count, message (extra columns are kept in
``Finding.extra``).
"""
from __future__ import annotations

import dataclasses
import importlib.resources
from typing import Any

from .sql_header import names, read_header

SEVERITIES = ("warning", "error")

#: capability → why a check that needs it cannot run without it
CAPABILITIES = {
    "descs": "the trace has no descriptor rows (no transfers were posted)",
    "layouts": "the trace has no layouts, so descriptor bytes cannot be mapped to pool/layer/slot",
    "slots": "the trace has no alloc/free events (no allocator hooks), so slot ownership is unknown",
    "writes": "the trace has no write events, so what a source held at post time is unknown",
    "reads": "the trace has no read events (no consumer hooks)",
    "checksums": "read/write events carry no checksums",
    "closed": "a shard is missing or was not closed, so the trace may end mid-run",
}


@dataclasses.dataclass
class Finding:
    """One root cause found by one check (many affected slots give one finding with a count)."""

    check: str
    severity: str            #: "error" | "warning"
    agent: str | None        #: the agent whose memory or action is at fault
    request: str | None
    pool: str | None
    layer: int | None        #: first affected layer
    slot: int | None         #: first affected slot
    events: list[tuple[str, int]]  #: (shard, seq) of the events involved, first examples
    count: int               #: affected (slot, layer) instances or transfers folded in
    message: str             #: one sentence a serving engineer understands
    slots: list[int] = dataclasses.field(default_factory=list)  #: every affected slot
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["events"] = [list(e) for e in self.events]
        return d


@dataclasses.dataclass(frozen=True)
class Check:
    """A check as declared by its SQL file header."""

    name: str
    severity: str
    needs: tuple[str, ...]
    summary: str
    explain: str
    sql: str


def parse_check(text: str) -> Check:
    """Parse a check file's header (see module doc)."""
    meta = read_header(text, ("check", "severity", "needs", "summary", "explain"), continued=("explain",))
    needs = names(meta.get("needs", ""))
    return Check(meta["check"], meta.get("severity", "error"), needs, meta.get("summary", ""),
                 meta.get("explain", meta.get("summary", "")), text)


_CATALOG: dict[str, Check] | None = None


def catalog() -> dict[str, Check]:
    """Every check, by name, in file-name order."""
    global _CATALOG
    if _CATALOG is None:
        files = importlib.resources.files("kvtrace.analysis.sql")
        out = {}
        for f in sorted(files.iterdir(), key=lambda p: p.name):
            if f.name.endswith(".sql"):
                text = f.read_text()
                if text.startswith("-- check:"):   # other .sql files here are views/exports
                    c = parse_check(text)
                    out[c.name] = c
        _CATALOG = out
    return _CATALOG


def rows_to_findings(check: str, table) -> list[Finding]:
    """Turn a check query's Arrow result into Findings."""
    std = {"severity", "agent", "request", "pool", "layer", "slot", "slots", "events", "count", "message"}
    out = []
    for r in table.to_pylist():
        ev = [(e["shard"], int(e["seq"])) for e in (r.get("events") or []) if e and e.get("seq") is not None]
        out.append(Finding(
            check=check, severity=r.get("severity") or "error", agent=r.get("agent"),
            request=r.get("request"), pool=r.get("pool"),
            layer=None if r.get("layer") is None else int(r["layer"]),
            slot=None if r.get("slot") is None else int(r["slot"]), events=ev,
            count=int(r.get("count") or 1), message=r.get("message") or check,
            slots=[int(s) for s in (r.get("slots") or []) if s is not None],
            extra={k: v for k, v in r.items() if k not in std}))
    return out


#: root cause → (consequence check, how they relate) that other checks also see: these are
#: folded into the root-cause finding so one bug reads as one finding
#: (``extra["folded"]`` keeps what was folded). Relations: "request" (same request),
#: "request_pool" (same request and pool), "victim" (same agent and a shared slot of the same pool, or the
#: other party of an overlap — a late write landing in the slot's next owner), "stray"
#: (an overlap one of whose two writers is the root's request, on a slot where the root
#: found that request's descriptors landing stray: the misaddressed copy is what collided).
FOLDS = {
    "layer_offset_mismatch": (("desc_not_owned", "request"), ("read_undelivered", "request"),
                              ("checksum_mismatch", "request"), ("desc_out_of_bounds", "request"),
                              ("overlapping_inflight_writes", "stray")),
    "read_before_done": (("checksum_mismatch", "request"), ("write_after_free", "request"),
                         ("read_undelivered", "request")),
    "read_undelivered": (("write_after_free", "request"),),
    "post_before_write": (("checksum_mismatch", "request"),),
    "write_after_free": (("overlapping_inflight_writes", "victim"), ("checksum_mismatch", "victim")),
    # the freed source's next owner wrote before the bytes moved: the read sees its bytes
    "src_free_before_done": (("checksum_mismatch", "request"),),
    # the pages a waiting request holds at trace end are the leak
    "request_waiting": (("leak", "request"),),
    # a dropped buffer class is read undelivered; an item length from the other side's
    # geometry lands past the request's pages
    "buffer_class_not_sent": (("read_undelivered", "request"), ("checksum_mismatch", "request")),
    "layout_mismatch": (("layer_offset_mismatch", "request_pool"), ("desc_not_owned", "request"), ("desc_out_of_bounds", "request"),
                        ("read_undelivered", "request"), ("checksum_mismatch", "request")),
}


def fold_sources(check: str) -> frozenset[str]:
    """The checks whose findings decide whether a finding of ``check`` survives fold():
    the roots that fold it and, transitively, those that fold them (a root finding
    folded away folds nothing). Once these have run, its fate is known."""
    out: set[str] = set()
    todo = [check]
    while todo:
        c = todo.pop()
        for root, consequences in FOLDS.items():
            if root not in out and any(cons == c for cons, _ in consequences):
                out.add(root)
                todo.append(root)
    return frozenset(out)


def _related(root: Finding, g: Finding, how: str) -> bool:
    if how == "request":
        return g.request == root.request
    if how == "request_pool":
        return g.request == root.request and g.pool == root.pool
    if how == "stray":
        return (root.request in (g.request, g.extra.get("other")) and g.agent == root.agent
                and g.pool == root.pool and bool(set(g.slots) & set(root.slots)))
    # victim: slot numbers are per pool, so a shared slot is one of the same pool
    if g.request == root.request or g.extra.get("other") == root.request:
        return True
    return g.agent == root.agent and g.pool == root.pool and bool(set(g.slots) & set(root.slots))


def fold(findings: list[Finding]) -> list[Finding]:
    """Fold consequence findings into their root-cause finding (see FOLDS).

    Returns new Finding objects for the roots: the inputs are never changed (the session
    caches them, so folding twice must not fold twice)."""
    drop: set[int] = set()
    added: dict[int, list[dict]] = {}
    for root, consequences in FOLDS.items():
        for f in findings:
            if f.check != root or id(f) in drop:
                continue
            for cons, how in consequences:
                for g in findings:
                    if g.check == cons and id(g) not in drop and _related(f, g, how):
                        drop.add(id(g))
                        added.setdefault(id(f), []).append({"check": g.check, "count": g.count, "request": g.request,
                                                            "pool": g.pool, "message": g.message})
    out = []
    for f in findings:
        if id(f) in drop:
            continue
        if id(f) in added:
            f = dataclasses.replace(f, extra={**f.extra, "folded": list(f.extra.get("folded") or []) + added[id(f)]})
        out.append(f)
    return out
