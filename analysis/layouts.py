"""Layout and config differences between the two sides of a transfer, and between two traces.

``side_diff(session)``: for every buffer class (pool, K/V part) transfers copy from one agent
to another, which registered geometry differs (bytes per slot and per token, page tokens,
dtype, slot count, region count, the head split the per-token ratio implies) and whether
the descriptors fit it. ``geometry(session)`` is one trace's geometry per agent and class,
what ``kvtrace diff`` compares between two traces.
"""
from __future__ import annotations

from fractions import Fraction

from .export_sql import load_sql

FIELDS = ("slot_bytes", "page_tokens", "bytes_per_token", "dtype", "num_slots", "regions")


def geometry(session) -> dict[tuple[str, str, str], dict]:
    """(agent, pool, part) -> its geometry (FIELDS, and 'varies')."""
    out = {}
    for r in session.query(load_sql("layout_geometry")).to_pylist():
        g = {k: r[k] for k in ("slot_bytes", "page_tokens", "dtype", "num_slots", "regions", "varies")}
        g["bytes_per_token"] = (Fraction(int(r["slot_bytes"]), int(r["page_tokens"]))
                                if r["slot_bytes"] is not None and r["page_tokens"] else None)
        out[(r["agent"], r["pool"], r["part"])] = g
    return out


def _fmt(v) -> str:
    if isinstance(v, Fraction):
        return str(float(v)) if v.denominator != 1 else str(v.numerator)
    return "-" if v is None else str(v)


def side_diff(session) -> list[dict]:
    """Every class copied between two agents whose geometries differ, with what differs."""
    if not session.capabilities().get("layouts") or not session.capabilities().get("descs"):
        return []
    session.derive()
    geo = geometry(session)
    shapes: dict[tuple, set] = {}
    for (_agent, pool, part), g in geo.items():
        shapes.setdefault((pool, part), set()).add(tuple(g[k] for k in FIELDS))
    if all(len(v) == 1 for v in shapes.values()):
        return []   # every agent registers each class alike: no flow between two of them can differ
    out = []
    for f in session.query(load_sql("layout_flows")).to_pylist():
        a = geo.get((f["src_agent"], f["pool"], f["part"]))
        b = geo.get((f["dst_agent"], f["pool"], f["part"]))
        if a is None or b is None:
            continue
        differs = [k for k in FIELDS if a[k] != b[k]]
        if not differs:
            continue
        split = None
        if "bytes_per_token" in differs and a["bytes_per_token"] and b["bytes_per_token"]:
            split = b["bytes_per_token"] / a["bytes_per_token"]
        consistent = f["uneven"] == 0 and "dtype" not in differs
        out.append({"src_agent": f["src_agent"], "dst_agent": f["dst_agent"], "pool": f["pool"],
                    "part": f["part"] or None, "differs": differs,
                    "src": {k: _fmt(a[k]) for k in FIELDS}, "dst": {k: _fmt(b[k]) for k in FIELDS},
                    "head_split": None if split is None else _fmt(split), "descs": f["descs"],
                    "uneven": f["uneven"], "consistent": consistent})
    return out


def describe(d: dict) -> str:
    """One line: the class, each differing field on both sides, and the descriptors' verdict."""
    cls = d["pool"] + (f" part {d['part']}" if d["part"] else "")
    parts = [f"{k} {d['src'][k]} vs {d['dst'][k]}" for k in d["differs"]]
    if d["head_split"] and d["head_split"] != "1" and "dtype" not in d["differs"]:
        parts.append(f"{d['dst_agent']} holds {d['head_split']}× {d['src_agent']}'s bytes per token (a head split)")
    verdict = ("the descriptors fit both" if d["consistent"] else
               "a byte copy cannot convert dtypes" if "dtype" in d["differs"] else
               f"{d['uneven']} descriptor(s) run past a slot on one side only")
    return (f"pool {cls}, {d['src_agent']} → {d['dst_agent']}: " + "; ".join(parts)
            + f" ({d['descs']} descriptor(s): {verdict}).")
