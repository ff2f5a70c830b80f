"""The further answers `kvtrace check` prints after the findings: how the two sides'
buffer layouts differ, and — for a trace cut short, where no hang can be proven — what each
still-open request holds and waits for at trace end. Each is JSON key → (title, JSON value,
text lines)."""
from __future__ import annotations


def sections(session) -> dict:
    from .layouts import describe, side_diff

    out = {}
    diff = side_diff(session)
    if diff:
        out["layout_diff"] = ("Layout differences between the two sides", diff, [describe(d) for d in diff])
    caps = session.capabilities()
    if not caps.get("closed") and caps.get("slots"):
        from .findings import catalog, rows_to_findings

        # the liveness check's own query; on a cut trace it is state, not a violation
        open_ = rows_to_findings("request_waiting", session.query(catalog()["request_waiting"].sql))
        if open_:
            out["state_at_trace_end"] = (
                "State at trace end (the trace was cut short: these requests may still have been in flight)",
                [f.to_dict() for f in open_], [f.message for f in open_])
    return out
