"""Layout and config differences between the two sides of a transfer, and between two traces.

``side_diff(session)``: for every buffer class (pool, K/V part) transfers copy from one agent
to another, which registered geometry differs (bytes per slot and per token, page tokens,
dtype, slot count, region count, the head split the per-token ratio implies) and whether
the descriptors fit it. ``geometry(session)`` is one trace's geometry per agent and class,
what ``kvtrace diff`` compares between two traces.

A pool's layers may differ in geometry (a KV-head count or head size per layer, layer
groups with their own page size). Such a class ("varies") is compared layer by layer on
the layers both sides register, and a field its layers disagree on is shown per layer
("64 (layers 0-1), 32 (layer 3)"), never as one value no layer has.
"""
from __future__ import annotations

from fractions import Fraction

from .export_sql import load_sql

FIELDS = ("slot_bytes", "page_tokens", "bytes_per_token", "dtype", "num_slots", "regions")
#: the fields each layer region has (regions is the class's count of them)
LAYER_FIELDS = FIELDS[:-1]


def _bpt(slot_bytes, page_tokens) -> Fraction | None:
    return Fraction(int(slot_bytes), int(page_tokens)) if slot_bytes is not None and page_tokens else None


def geometry(session) -> dict[tuple[str, str, str], dict]:
    """(agent, pool, part) -> its geometry: FIELDS (a field the class's layers disagree on
    is a per-layer text), 'varies', and 'per_layer' (layer -> that layer's LAYER_FIELDS)."""
    out = {}
    for r in session.query(load_sql("layout_geometry")).to_pylist():
        per_layer = {}
        for x in r["per_layer"]:   # a layer registered twice, differently: its first geometry
            per_layer.setdefault(x["layer"], {**{k: x[k] for k in ("slot_bytes", "page_tokens", "dtype", "num_slots")},
                                              "bytes_per_token": _bpt(x["slot_bytes"], x["page_tokens"])})
        g = {"regions": r["regions"], "varies": r["varies"], "per_layer": per_layer}
        if r["varies"]:   # a field all layers agree on keeps its value
            for k in LAYER_FIELDS:
                values = {x[k] for x in per_layer.values()}
                g[k] = values.pop() if len(values) == 1 else _per_layer_text(per_layer, k, sorted(per_layer))
        else:
            g.update({k: r[k] for k in ("slot_bytes", "page_tokens", "dtype", "num_slots")})
            g["bytes_per_token"] = _bpt(r["slot_bytes"], r["page_tokens"])
        out[(r["agent"], r["pool"], r["part"])] = g
    return out


def _fmt(v) -> str:
    if isinstance(v, Fraction):
        return str(float(v)) if v.denominator != 1 else str(v.numerator)
    return "-" if v is None else str(v)


def _ranges(layers) -> str:
    """'layer 2' / 'layers 0-3, 7'."""
    runs: list[list[int]] = []
    for x in sorted(layers):
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return ("layer " if len(layers) == 1 else "layers ") + text


def _per_layer_text(per_layer: dict, k: str, layers) -> str:
    """The value of ``k`` over ``layers``: one value, or each value with its layers."""
    by: dict[str, list[int]] = {}
    for L in layers:
        by.setdefault(_fmt(per_layer[L][k]), []).append(L)
    if len(by) == 1:
        return next(iter(by))
    return ", ".join(f"{v} ({_ranges(ls)})" for v, ls in sorted(by.items(), key=lambda kv: kv[1][0]))


def _flows(session) -> dict[tuple, dict]:
    """(src_agent, dst_agent, pool, part) -> source layer -> (descriptors, uneven)."""
    out: dict[tuple, dict] = {}
    for f in session.query(load_sql("layout_flows")).to_pylist():
        out.setdefault((f["src_agent"], f["dst_agent"], f["pool"], f["part"]), {})[f["layer"]] = (f["descs"], f["uneven"])
    return out


def side_diff(session) -> list[dict]:
    """Every class copied between two agents whose geometries differ, with what differs."""
    if not session.capabilities().get("layouts") or not session.capabilities().get("descs"):
        return []
    session.derive()
    geo = geometry(session)
    shapes: dict[tuple, set] = {}
    for (_agent, pool, part), g in geo.items():
        shapes.setdefault((pool, part), set()).add(
            (g["regions"], tuple(sorted((L, tuple(x[k] for k in LAYER_FIELDS)) for L, x in g["per_layer"].items()))))
    if all(len(v) == 1 for v in shapes.values()):
        return []   # every agent registers each class alike: no flow between two of them can differ
    out = []
    for (src, dst, pool, part), per in sorted(_flows(session).items()):
        a, b = geo.get((src, pool, part)), geo.get((dst, pool, part))
        if a is None or b is None:
            continue
        row = {"src_agent": src, "dst_agent": dst, "pool": pool, "part": part or None}
        d = _compare(a, b, per) if a["varies"] or b["varies"] else _compare_uniform(a, b, per)
        if d is not None:
            out.append({**row, **d})
    return out


def _compare_uniform(a: dict, b: dict, per: dict) -> dict | None:
    """Two classes each of one geometry: their fields, and every descriptor of the flow."""
    differs = [k for k in FIELDS if a[k] != b[k]]
    if not differs:
        return None
    split = None
    if "bytes_per_token" in differs and a["bytes_per_token"] and b["bytes_per_token"]:
        split = b["bytes_per_token"] / a["bytes_per_token"]
    descs, uneven = sum(n for n, _ in per.values()), sum(u for _, u in per.values())
    return {"differs": differs, "src": {k: _fmt(a[k]) for k in FIELDS}, "dst": {k: _fmt(b[k]) for k in FIELDS},
            "head_split": None if split is None else _fmt(split), "descs": descs, "uneven": uneven,
            "consistent": uneven == 0 and "dtype" not in differs}


def _compare(a: dict, b: dict, per: dict) -> dict | None:
    """Classes whose layers differ: compared layer by layer on the layers both register;
    the fields, descriptors and verdict are those of the layers that differ (``layers``)."""
    common = sorted(set(a["per_layer"]) & set(b["per_layer"]))
    by_layer = {L: [k for k in LAYER_FIELDS if a["per_layer"][L][k] != b["per_layer"][L][k]] for L in common}
    layers = [L for L in common if by_layer[L]]
    differs = [k for k in LAYER_FIELDS if any(k in by_layer[L] for L in layers)]
    if a["regions"] != b["regions"]:
        differs.append("regions")
    if not differs:
        return None
    shown = layers or common
    # a differing field is shown on the layers where it differs (named when not all of them)
    on = {k: [L for L in layers if k in by_layer[L]] for k in differs if k != "regions"}
    side = {}
    for name, g in (("src", a), ("dst", b)):
        side[name] = {k: _per_layer_text(g["per_layer"], k, on.get(k) or shown) if shown else _fmt(g[k])
                      for k in LAYER_FIELDS}
        side[name]["regions"] = _fmt(g["regions"])
    splits = {b["per_layer"][L]["bytes_per_token"] / a["per_layer"][L]["bytes_per_token"]
              for L in layers if "bytes_per_token" in by_layer[L]
              and a["per_layer"][L]["bytes_per_token"] and b["per_layer"][L]["bytes_per_token"]}
    descs = sum(per.get(L, (0, 0))[0] for L in layers)
    # as layout_mismatch: another dtype never fits; other bytes per token fit unless a
    # descriptor of such a layer runs past a slot on one side only
    bad = any("dtype" in by_layer[L] and per.get(L, (0, 0))[0] > 0
              or "bytes_per_token" in by_layer[L] and per.get(L, (0, 0))[1] > 0 for L in layers)
    return {"differs": differs, "src": side["src"], "dst": side["dst"],
            "head_split": _fmt(next(iter(splits))) if len(splits) == 1 else None,
            "descs": descs, "uneven": sum(per.get(L, (0, 0))[1] for L in layers), "consistent": not bad,
            "layers": _ranges(layers) if layers else None, "common_layers": len(common),
            "field_layers": {k: _ranges(ls) for k, ls in on.items() if ls != layers}}


def describe(d: dict) -> str:
    """One line: the class, each differing field on both sides, and the descriptors' verdict."""
    cls = d["pool"] + (f" part {d['part']}" if d["part"] else "")
    if d.get("layers"):
        cls += f", {d['layers']} (of the {d['common_layers']} both sides register)"
    on = d.get("field_layers") or {}
    parts = [f"{k} {d['src'][k]} vs {d['dst'][k]}" + (f" on {on[k]}" if k in on else "") for k in d["differs"]]
    if d["head_split"] and d["head_split"] != "1" and "dtype" not in d["differs"]:
        parts.append(f"{d['dst_agent']} holds {d['head_split']}× {d['src_agent']}'s bytes per token (a head split)")
    verdict = ("the descriptors fit both" if d["consistent"] else
               "a byte copy cannot convert dtypes" if "dtype" in d["differs"] else
               f"{d['uneven']} descriptor(s) run past a slot on one side only")
    return (f"pool {cls}, {d['src_agent']} → {d['dst_agent']}: " + "; ".join(parts)
            + f" ({d['descs']} descriptor(s): {verdict}).")
