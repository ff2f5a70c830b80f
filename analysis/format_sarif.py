"""``kvtrace check --format sarif``: findings as SARIF 2.1.0 (GitHub code scanning and
other static-analysis dashboards read it).

One rule per check (its summary and explanation), one result per finding with the
check's severity as level; the location is logical (agent / pool / layer / slot, and the
trace's shard and event seq), since a trace has no source lines. Findings accepted in a
baseline carry ``baselineState: unchanged`` and an external suppression; new ones
``baselineState: new`` when a baseline was applied.
"""
from __future__ import annotations

import json

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _result(f, trace: str, rule_index: dict, state: str | None) -> dict:
    loc = "/".join(str(x) for x in (f.agent, f.pool, None if f.layer is None else f"L{f.layer}",
                                    None if f.slot is None else f"slot {f.slot}") if x is not None)
    r = {"ruleId": f.check, "ruleIndex": rule_index[f.check], "level": "error" if f.severity == "error" else "warning",
         "message": {"text": f.message},
         "locations": [{"logicalLocations": [{"name": loc or f.check, "kind": "resource"}],
                        "physicalLocation": {"artifactLocation": {"uri": trace}}}],
         "properties": {"request": f.request, "count": f.count, "slots": list(f.slots),
                        "events": [list(e) for e in f.events]}}
    if state:
        r["baselineState"] = state
    if state == "unchanged":
        r["suppressions"] = [{"kind": "external", "justification": "accepted in the kvtrace baseline"}]
    return r


def write(file, trace: str, catalog: dict, findings: list, accepted: list, baseline: bool,
          version: str, skipped: list[tuple[str, str]] = ()) -> None:
    """Write one SARIF log (one run) for a trace's check run to ``file``."""
    names = list(catalog)
    rule_index = {n: i for i, n in enumerate(names)}
    rules = [{"id": n, "name": n, "shortDescription": {"text": c.summary or n},
              "fullDescription": {"text": c.explain or c.summary or n},
              "defaultConfiguration": {"level": "error" if c.severity == "error" else "warning"}}
             for n, c in catalog.items()]
    results = [_result(f, trace, rule_index, "new" if baseline else None) for f in findings]
    results += [_result(f, trace, rule_index, "unchanged") for f in accepted]
    run = {"tool": {"driver": {"name": "kvtrace", "version": version,
                               "rules": rules}},
           "artifacts": [{"location": {"uri": trace}, "description": {"text": "kvtrace trace directory"}}],
           "results": results,
           "invocations": [{"executionSuccessful": True,
                            "toolExecutionNotifications": [
                                {"level": "note", "message": {"text": f"{c} did not run: {why}"}}
                                for c, why in skipped]}]}
    json.dump({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, file, indent=1)
    file.write("\n")
