"""What the vLLM tests read back: ``kvtrace info`` of a trace, the driver's prefill report,
and the trace's layouts and descriptors (to hold them against what vLLM registered)."""
from __future__ import annotations

import json
import subprocess
import sys

from kvtrace.tracer import open_trace


def info(trace: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "kvtrace", "info", "--json", trace],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def prefill_report(run) -> dict:
    with open(run.trace[: -len(".kvtrace")] + ".json.prefill") as f:
        return json.load(f)


def layouts(trace: str) -> dict[str, list[dict]]:
    """agent -> its layout rows, by address."""
    out: dict[str, list[dict]] = {}
    for r in open_trace(trace).table("layouts").to_pylist():
        out.setdefault(r["agent"], []).append(r)
    return {a: sorted(rs, key=lambda r: r["addr"]) for a, rs in out.items()}


def as_registered(rows: list[dict]) -> list[dict]:
    """Layout rows in the driver's terms for vLLM's regions (addr, block_len, stride, blocks)."""
    return [{"addr": r["addr"], "block_len": r["slot_bytes"], "block_stride": r["slot_bytes"],
             "blocks": r["num_slots"]} for r in rows]


def uncovered(trace: str) -> list[tuple]:
    """Descriptor ends that are not exactly one slot of one layout of their agent."""
    lay = layouts(trace)
    bad = []
    for d in open_trace(trace).table("descs").to_pylist():
        for side in ("src", "dst"):
            addr, agent = d[f"{side}_addr"], d[f"{side}_agent"]
            hit = [r for r in lay.get(agent, ()) if r["addr"] <= addr < r["addr"] + r["nbytes"]
                   and (addr - r["addr"]) % r["slot_bytes"] == 0 and d["nbytes"] == r["slot_bytes"]]
            if len(hit) != 1:
                bad.append((side, agent, addr, d["nbytes"], len(hit)))
    return bad


def slot_spans(trace: str) -> list[dict]:
    """Every descriptor's two ends as (agent, slot, byte offset in the slot, slot bytes) of
    the one layout of its agent that holds the end (None when no layout or more than one
    does, or the bytes run past the slot): where in a slot each head slice was read from and
    written to."""
    lay = layouts(trace)
    out = []
    for d in open_trace(trace).table("descs").to_pylist():
        row = {"xfer": d["xfer"], "nbytes": d["nbytes"]}
        for side in ("src", "dst"):
            addr, agent = d[f"{side}_addr"], d[f"{side}_agent"]
            hit = [r for r in lay.get(agent, ()) if r["addr"] <= addr < r["addr"] + r["nbytes"]]
            if len(hit) != 1 or (addr - hit[0]["addr"]) % hit[0]["slot_bytes"] + d["nbytes"] > hit[0]["slot_bytes"]:
                row[side] = None
                continue
            r = hit[0]
            row[side] = {"agent": agent, "pool": r["pool"], "layer": r["layer"],
                         "slot": (addr - r["addr"]) // r["slot_bytes"],
                         "off": (addr - r["addr"]) % r["slot_bytes"], "slot_bytes": r["slot_bytes"]}
        out.append(row)
    return out
