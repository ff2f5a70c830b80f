"""Slot occupancy per (agent, pool) over time, from alloc/free events.

Ownership is counted by reference (a prefix-shared slot has several holders); a slot is
occupied while at least one holder has it. A free of a slot nobody holds (an allocator
bug the checks report) leaves occupancy unchanged rather than going negative.
"""
from __future__ import annotations


def occupancy_series(session, times: dict | None = None) -> dict:
    """``{(agent, pool): [(ts, occupied_slots), ...]}`` in program order.

    Args:
        session: a TraceSession.
        times: optional ``(shard, seq) -> ts`` map (the exporter's monotonic times);
            without it, ts is the raw ``t_ns``.
    """
    tbl = session.query(
        "SELECT shard, seq, t_ns, coalesce(agent, shard) AS agent, pool, kind, slots FROM events "
        "WHERE kind IN ('alloc', 'free') AND pool IS NOT NULL ORDER BY shard, seq").to_pydict()
    refs: dict = {}
    out: dict = {}
    for i in range(len(tbl["seq"])):
        key = (tbl["agent"][i], tbl["pool"][i])
        held = refs.setdefault(key, {})
        if tbl["kind"][i] == "alloc":
            for s in tbl["slots"][i] or ():
                held[s] = held.get(s, 0) + 1
        else:
            for s in tbl["slots"][i] or ():
                c = held.get(s, 0)
                if c <= 1:
                    held.pop(s, None)
                else:
                    held[s] = c - 1
        ts = times.get((tbl["shard"][i], tbl["seq"][i])) if times is not None else tbl["t_ns"][i]
        series = out.setdefault(key, [])
        ts = max(ts or 0, series[-1][0]) if series else (ts or 0)
        series.append((ts, len(held)))
    return out
