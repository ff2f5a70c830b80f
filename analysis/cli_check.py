"""Run the hazard checks over a trace: findings grouped by check, then the verdict on the
seeds' question (uniform slot count / slot reuse before read / completion before data).

Exit status: 0 clean, 1 findings at or above --fail-on (gate CI with it), 2 bad input.

examples:
  kvtrace check run.kvtrace
  kvtrace check run.kvtrace --only layer_offset_mismatch,write_after_free --format json
  kvtrace check run.kvtrace --fail-on warning
  kvtrace check --explain src_free_before_done
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="?", help="trace directory (NAME.kvtrace)")
    p.add_argument("--only", default=None, help="comma-separated check names to run")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    p.add_argument("--fail-on", choices=("warning", "error"), default="error",
                   help="exit 1 when findings of this severity or worse exist (default: error)")
    p.add_argument("--explain", metavar="NAME", help="describe a check and exit ('all' lists them)")
    p.add_argument("--examples", type=int, default=3, help="example findings shown per check (table)")
    p.add_argument("--threads", type=int, default=None, help="DuckDB threads")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from . import render
    from .findings import catalog

    if args.explain:
        return render.explain(args.explain, catalog())
    if not args.trace:
        raise UsageError("give a trace directory (or --explain NAME)")
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    from .session import TraceSession

    with TraceSession(args.trace, threads=args.threads) as s:
        findings = s.findings(only)
        verdict = s.verdict(findings) if not only else None
        render.emit(args.format, s, findings, verdict, examples=args.examples)
    worst = {"warning": 0, "error": 1}
    bar = worst[args.fail_on]
    return 1 if any(worst.get(f.severity, 1) >= bar for f in findings) else 0
