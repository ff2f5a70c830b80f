"""Findings and verdict of a trace as plain dicts, for exporters and the report.

The checks live behind ``TraceSession.findings()`` and ``TraceSession.verdict()``
(analysis engineer's API). A Finding carries check, severity, agent, request, pool,
layer, slot, events [(shard, seq)], count and message; this module only adapts it.
"""
from __future__ import annotations

import dataclasses

FIELDS = ("check", "severity", "agent", "request", "pool", "layer", "slot", "count", "message", "events")


def _as_dict(f) -> dict:
    if isinstance(f, dict):
        d = dict(f)
    elif dataclasses.is_dataclass(f):
        d = {fl.name: getattr(f, fl.name) for fl in dataclasses.fields(f)}
    else:
        d = {k: getattr(f, k, None) for k in FIELDS}
    d["events"] = [tuple(e) for e in (d.get("events") or [])]
    for k in FIELDS:
        d.setdefault(k, None)
    return d


def _verdict_text(v) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, str):
        return v
    if callable(getattr(v, "lines", None)):   # analysis.verdict.Verdict: headline + one line per suspect
        return "\n".join(line.strip() for line in v.lines())
    for attr in ("text", "summary", "line", "value", "name"):
        x = getattr(v, attr, None)
        if isinstance(x, str):
            return x
    return str(v)


def findings_and_verdict(session) -> tuple[list[dict], str]:
    """``(findings as dicts, verdict text: a headline, then one line per hypothesis)``; ``([], 'checks unavailable')`` when this
    kvtrace has no checks yet."""
    get = getattr(session, "findings", None)
    if get is None:
        return [], "checks unavailable"
    raw = list(get())
    findings = [_as_dict(f) for f in raw]
    fallback = "no findings" if not findings else f"{len(findings)} finding(s)"
    verdict = getattr(session, "verdict", None)
    if verdict is None:
        return findings, fallback
    try:
        return findings, _verdict_text(verdict(raw))
    except ImportError:   # a checkout whose verdict module is not there yet
        return findings, fallback
