"""Concurrency sweep: record the reference engine at each point, check each trace, and
collect the corrupted-request rate and the findings per point.

A configuration is one index_k dtype (plus the injected bugs, the same for all); a
point is one concurrency of one configuration. Recording goes through the engine's
Python entry (``kvtrace.tracer.engine.cli.run_engine``) with the arguments
``kvtrace record`` would parse, so a sweep point is exactly a ``kvtrace record`` run.
The corrupted-request rate comes from the engine's verifier summary when the trace
carries one, else from the trace's own checksums (export_corrupted_requests.sql).
"""
from __future__ import annotations

import argparse
import contextlib
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
    source: str                 # engine-verifier | trace-checksums
    findings: dict              # check -> number of findings
    affected: dict              # check -> summed finding counts
    verdict: str
    record_s: float
    check_s: float


def config_label(index_k: str | None, inject: list[str]) -> str:
    """Short name of a configuration, e.g. ``index_k=bf16 +uniform-slot-count``."""
    label = f"index_k={index_k}" if index_k else "index_k=preset"
    return label + "".join(f" +{b}" for b in inject)


def record_point(out: str, workload: str, concurrency: int, inject: list[str], index_k: str | None,
                 seed: int | None, processes: int, device: str, log_path: str) -> None:
    """Record one point with the reference engine, exactly as ``kvtrace record`` would."""
    from kvtrace.cli import UserError
    from kvtrace.tracer import cli_record

    argv = ["-o", out, "--workload", workload, "--concurrency", str(concurrency), "--processes", str(processes),
            "--device", device, "--no-progress", "--force"]
    for b in inject:
        argv += ["--inject", b]
    if index_k:
        argv += ["--index-k", index_k]
    if seed is not None:
        argv += ["--seed", str(seed)]
    p = argparse.ArgumentParser(prog="kvtrace record")
    cli_record.add_arguments(p)
    args = p.parse_args(argv)
    try:
        from kvtrace.tracer.engine.cli import run_engine
    except ImportError as e:
        raise UserError(f"the reference engine is not available in this install ({e})") from None
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        rc = run_engine(args)
    if rc:
        raise UserError(f"recording concurrency {concurrency} failed (exit {rc}); see {log_path}")


def _verifier_summary(trace_path: str) -> dict | None:
    """The engine's verifier summary if the trace carries one (manifest or summary file)."""
    candidates = []
    try:
        with open(os.path.join(trace_path, "manifest.json")) as f:
            man = json.load(f)
        candidates += [man.get(k) for k in ("verifier", "verify", "summary", "engine")]
    except (OSError, ValueError):
        pass
    for name in ("_summary.json", "_verifier.json", "summary.json"):
        try:
            with open(os.path.join(trace_path, name)) as f:
                candidates.append(json.load(f))
        except (OSError, ValueError):
            pass
    for c in candidates:
        if isinstance(c, dict):
            c = c.get("verifier", c)
            req = next((c[k] for k in ("requests_verified", "requests_checked", "verified", "requests")
                        if isinstance(c.get(k), int)), None)
            bad = next((c[k] for k in ("requests_corrupted", "corrupted_requests", "corrupted")
                        if isinstance(c.get(k), int)), None)
            if req is not None and bad is not None:
                return {"requests": req, "corrupted": bad}
    return None


def check_point(trace_path: str) -> tuple[int, int, str, dict, dict, str]:
    """(requests judged, corrupted, source, findings per check, affected per check, verdict)."""
    from .export_findings import findings_and_verdict
    from .session import TraceSession

    with TraceSession(trace_path) as s:
        findings, verdict = findings_and_verdict(s)
        summary = _verifier_summary(trace_path)
        if summary is not None:
            req, bad, source = summary["requests"], summary["corrupted"], "engine-verifier"
        else:
            rows = s.query(load_sql("export_corrupted_requests")).to_pydict()
            req, bad, source = len(rows["request"]), sum(bool(c) for c in rows["corrupted"]), "trace-checksums"
    per, affected = {}, {}
    for f in findings:
        per[f["check"]] = per.get(f["check"], 0) + 1
        affected[f["check"]] = affected.get(f["check"], 0) + int(f["count"] or 1)
    return req, bad, source, per, affected, verdict


def run_sweep(out_dir: str, workload: str, concurrencies: list[int], inject: list[str],
              index_ks: list[str | None], seed: int | None = None, processes: int = 1, device: str = "cpu",
              progress=None) -> list[Point]:
    """Record and check every (index_k, concurrency) point; returns the points.

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
            record_point(trace, workload, c, inject, ik, seed, processes, device,
                         os.path.join(out_dir, "logs", name + ".log"))
            t_rec = time.perf_counter() - t
            if progress:
                progress(0, f"{label} @ {c}: checking")
            t = time.perf_counter()
            req, bad, source, per, affected, verdict = check_point(trace)
            points.append(Point(label, ik, c, os.path.relpath(trace, out_dir), req, bad, bad / req if req else 0.0,
                                source, per, affected, verdict.splitlines()[0] if verdict else "",
                                round(t_rec, 2), round(time.perf_counter() - t, 2)))
            if progress:
                progress(1, f"{label} @ {c}: {bad}/{req} corrupted")
    return points


def write_results(out_dir: str, points: list[Point], meta: dict) -> str:
    """Write ``sweep.json``; returns its path."""
    path = os.path.join(out_dir, "sweep.json")
    with open(path, "w") as f:
        json.dump({**meta, "points": [dataclasses.asdict(p) for p in points]}, f, indent=1)
    return path
