"""Concurrency sweep: record the reference engine at each point, check each trace, and
collect the corrupted-request rate and the findings per point.

A configuration is one index_k dtype (plus the injected bugs, the same for all); a
point is one concurrency of one configuration. Recording is the caller's: ``kvtrace sweep``
(cli_sweep.py) passes the reference engine's Python entry with the arguments ``kvtrace
record`` would parse, so a sweep point is exactly a ``kvtrace record`` run.
The corrupted-request rate comes from the engine's verifier summary when the trace
carries one, else from the trace's own checksums (export_corrupted_requests.sql).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

from .export_sql import load_sql


@dataclasses.dataclass
class Point:
    """One recorded and checked sweep point."""
    config: str
    index_k: str | None
    concurrency: int
    trace: str
    requests: int               # requests judged (read something comparable)
    corrupted: int              # of those, requests that read wrong bytes
    rate: float                 # corrupted / requests (0 when none judged)
    source: str                 # engine-verifier | trace-checksums (which one rate comes from)
    findings: dict              # check -> number of findings
    affected: dict              # check -> summed finding counts
    verdict: str
    record_s: float
    check_s: float
    checksum_requests: int = 0          # cross-check from the trace's checksums alone
    checksum_corrupted: int = 0
    pages_read: int | None = None       # engine verifier: pages compared / corrupted
    corrupted_pages: int | None = None


def config_label(index_k: str | None, inject: list[str]) -> str:
    """Short name of a configuration, e.g. ``index_k=bf16 +uniform-slot-count``."""
    label = f"index_k={index_k}" if index_k else "index_k=preset"
    return label + "".join(f" +{b}" for b in inject)


def _verifier_summary(trace_path: str) -> dict | None:
    """The engine verifier's summary stored in the trace's manifest (``engine``), if any."""
    try:
        with open(os.path.join(trace_path, "manifest.json")) as f:
            eng = json.load(f).get("engine")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(eng, dict) and isinstance(eng.get("requests_read"), int) \
            and isinstance(eng.get("corrupted_requests"), int):
        return eng
    return None


def check_point(trace_path: str) -> dict:
    """Check one recorded point: findings, verdict, and the corrupted-request counts.

    The rate comes from the engine verifier's summary when the trace has one; the trace's
    own checksums are always evaluated too (``checksum_*``), as an independent cross-check.
    """
    from .export_findings import findings_and_verdict
    from .session import TraceSession

    with TraceSession(trace_path) as s:
        findings, verdict = findings_and_verdict(s)
        rows = s.query(load_sql("export_corrupted_requests")).to_pydict()
    ck_req, ck_bad = len(rows["request"]), sum(bool(c) for c in rows["corrupted"])
    eng = _verifier_summary(trace_path)
    out = {"checksum_requests": ck_req, "checksum_corrupted": ck_bad, "verdict": verdict,
           "pages_read": None, "corrupted_pages": None}
    if eng is not None:
        out.update(requests=eng["requests_read"], corrupted=eng["corrupted_requests"], source="engine-verifier",
                   pages_read=eng.get("pages_read"), corrupted_pages=eng.get("corrupted_pages"))
    else:
        out.update(requests=ck_req, corrupted=ck_bad, source="trace-checksums")
    per, affected = {}, {}
    for f in findings:
        per[f["check"]] = per.get(f["check"], 0) + 1
        affected[f["check"]] = affected.get(f["check"], 0) + int(f["count"] or 1)
    out.update(findings=per, affected=affected)
    return out


def run_sweep(out_dir: str, record, concurrencies: list[int], inject: list[str],
              index_ks: list[str | None], progress=None) -> list[Point]:
    """Record and check every (index_k, concurrency) point; returns the points.

    ``record(trace_dir, concurrency, index_k, log_path)`` records one point (the CLI
    passes the reference engine; analysis itself never runs an engine).
    ``progress(advance_by, description)`` is called around each point (a rich bar in
    the CLI). Traces go to ``out_dir/traces``, engine logs to ``out_dir/logs``.
    """
    os.makedirs(os.path.join(out_dir, "traces"), exist_ok=True)
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    points = []
    for ik in index_ks:
        label = config_label(ik, inject)
        for c in concurrencies:
            name = f"{ik or 'preset'}_c{c}"
            if progress:
                progress(0, f"{label} @ {c}: recording")
            trace = os.path.join(out_dir, "traces", name + ".kvtrace")
            t = time.perf_counter()
            record(trace, c, ik, os.path.join(out_dir, "logs", name + ".log"))
            t_rec = time.perf_counter() - t
            if progress:
                progress(0, f"{label} @ {c}: checking")
            t = time.perf_counter()
            r = check_point(trace)
            req, bad = r["requests"], r["corrupted"]
            points.append(Point(label, ik, c, os.path.relpath(trace, out_dir), req, bad, bad / req if req else 0.0,
                                r["source"], r["findings"], r["affected"],
                                r["verdict"].splitlines()[0] if r["verdict"] else "",
                                round(t_rec, 2), round(time.perf_counter() - t, 2),
                                r["checksum_requests"], r["checksum_corrupted"], r["pages_read"],
                                r["corrupted_pages"]))
            if progress:
                progress(1, f"{label} @ {c}: {bad}/{req} corrupted")
    return points


def write_results(out_dir: str, points: list[Point], meta: dict) -> str:
    """Write ``sweep.json``; returns its path."""
    path = os.path.join(out_dir, "sweep.json")
    with open(path, "w") as f:
        json.dump({**meta, "points": [dataclasses.asdict(p) for p in points]}, f, indent=1)
    return path
