"""Compare two traces — e.g. the same workload on two engine versions: the registered
layouts per agent and buffer class (pool, K/V part), the recorded configuration, and the
findings per check (how many root causes and affected instances each side has).

Exit status: 0 the two agree, 1 something differs, 2 bad input.

examples:
  kvtrace diff before.kvtrace after.kvtrace
  kvtrace diff before.kvtrace after.kvtrace --format json
"""
from __future__ import annotations

import argparse

#: manifest fields that describe how a trace was made (not when, nor its results)
CONFIG_SKIP = {"created_unix", "finished_unix", "shards", "complete", "engine"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="first trace directory (NAME.kvtrace)")
    p.add_argument("b", help="second trace directory")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--threads", type=int, default=None, help="DuckDB threads")


def _side(path: str, threads):
    from .layouts import geometry
    from .session import TraceSession

    with TraceSession(path, threads=threads) as s:
        findings = s.findings()
        per: dict[str, list[int]] = {}
        for f in findings:
            n = per.setdefault(f.check, [0, 0])
            n[0] += 1
            n[1] += f.count
        geo = geometry(s) if s.capabilities().get("layouts") else {}
        config = _flat({k: v for k, v in s.trace.manifest.items() if k not in CONFIG_SKIP})
        return geo, config, per


def _flat(d: dict, prefix: str = "") -> dict:
    """Nested settings as dotted keys, so a diff names the one setting that changed."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def compare(a: tuple, b: tuple) -> dict:
    """The differences between two sides' (geometry, config, per-check counts)."""
    from .layouts import FIELDS, _fmt

    (ga, ca, pa), (gb, cb, pb) = a, b
    layouts = []
    for key in sorted(set(ga) | set(gb)):
        x, y = ga.get(key), gb.get(key)
        agent, pool, part = key
        row = {"agent": agent, "pool": pool, "part": part or None}
        if x is None or y is None:
            layouts.append({**row, "only_in": "a" if y is None else "b"})
            continue
        changed = {k: [_fmt(x[k]), _fmt(y[k])] for k in FIELDS if x[k] != y[k]}
        if changed:
            layouts.append({**row, "changed": changed})
    config = {k: [ca.get(k), cb.get(k)] for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)}
    checks = {k: {"a": pa.get(k, [0, 0]), "b": pb.get(k, [0, 0])} for k in sorted(set(pa) | set(pb))
              if pa.get(k) != pb.get(k)}
    return {"layouts": layouts, "config": config, "checks": checks}


def lines(d: dict, a: str, b: str) -> list[str]:
    """The differences in words (A is the first trace, B the second)."""
    out = [f"A = {a}", f"B = {b}"]
    if not (d["layouts"] or d["config"] or d["checks"]):
        return out + ["The two traces agree on layouts, configuration and findings per check."]
    if d["layouts"]:
        out.append("Layouts (agent, pool, part):")
        for r in d["layouts"]:
            cls = f"  {r['agent']} {r['pool']}" + (f" part {r['part']}" if r["part"] else "")
            if "only_in" in r:
                out.append(f"{cls}: registered only in {r['only_in'].upper()}")
            else:
                out.append(f"{cls}: " + "; ".join(f"{k} {v[0]} → {v[1]}" for k, v in r["changed"].items()))
    if d["config"]:
        out.append("Configuration:")
        out += [f"  {k}: {v[0]!r} → {v[1]!r}" for k, v in d["config"].items()]
    if d["checks"]:
        out.append("Findings per check (findings / affected instances):")
        out += [f"  {k}: {v['a'][0]} / {v['a'][1]} → {v['b'][0]} / {v['b'][1]}" for k, v in d["checks"].items()]
    return out


def run(args) -> int:
    import json

    d = compare(_side(args.a, args.threads), _side(args.b, args.threads))
    if args.format == "json":
        print(json.dumps({"a": args.a, "b": args.b, **d}, indent=1, default=str))
    else:
        print("\n".join(lines(d, args.a, args.b)))
    return 1 if (d["layouts"] or d["config"] or d["checks"]) else 0
