"""Run the hazard checks over a trace: findings grouped by check, then the verdict — the
root causes found and, where they apply, hypotheses judged against the evidence.

Hypotheses are files: --hypotheses NAME (a shipped one, e.g. pd-corruption: uniform slot
count / slot reuse before read / completion before data) or --hypotheses FILE.toml. A
shipped file also applies unasked when the trace's layout makes it relevant (pd-corruption:
pools or prepared lists whose regions differ in slot count); --hypotheses none turns that off.

Every check ends in one state (JSON: verdict.checks): violated; holds (nothing found over
complete, ordered facts); unknown (nothing proven, but facts are missing or unordered, or
it could compare only part of its input: a note says what it left out, e.g. reads filled by
head slices, whose checksum cannot be predicted); skipped (it could not run or compared
nothing; the reason is printed).

Exit status: 0 clean, 1 findings at or above --fail-on (gate CI with it), 2 bad input.
With --baseline FILE only findings the baseline does not accept count (docs/ci.md);
--write-baseline FILE writes the current findings as one. --format junit / sarif write
JUnit XML (a test case per check) or SARIF 2.1.0 for CI dashboards.

examples:
  kvtrace check run.kvtrace
  kvtrace check run.kvtrace --only layer_offset_mismatch,write_after_free --format json
  kvtrace check run.kvtrace --fail-on warning
  kvtrace check --explain src_free_before_done
  kvtrace check run.kvtrace --hypotheses pd-corruption
  kvtrace check run.kvtrace --format junit --baseline kvtrace-baseline.json > kvtrace.xml
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="?", help="trace directory (NAME.kvtrace)")
    p.add_argument("--only", default=None, help="comma-separated check names to run")
    p.add_argument("--format", choices=("table", "json", "csv", "junit", "sarif"), default="table")
    p.add_argument("--fail-on", choices=("warning", "error"), default="error",
                   help="exit 1 when findings of this severity or worse exist (default: error)")
    p.add_argument("--baseline", metavar="FILE", help="accepted findings (JSON); only new ones fail (docs/ci.md)")
    p.add_argument("--write-baseline", metavar="FILE", help="write the findings as a baseline file and exit 0")
    p.add_argument("--explain", metavar="NAME", help="describe a check and exit ('all' lists them)")
    p.add_argument("--examples", type=int, default=3, help="example findings shown per check (table)")
    p.add_argument("--threads", type=int, default=None, help="DuckDB threads")
    p.add_argument("--memory", metavar="SIZE", default=None,
                   help="memory cap of the analysis, e.g. 3GB (default: KVTRACE_DUCKDB_MEMORY or 40%% of RAM); spills under the trace's _index/")
    p.add_argument("--hypotheses", action="append", default=None, metavar="NAME|FILE",
                   help="judge the hypotheses of a shipped file (by name) or a TOML file (repeatable; "
                        "'none': only the root causes)")


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

    base = None
    if args.baseline:
        from .baseline import load
        base = load(args.baseline)
    with TraceSession(args.trace, threads=args.threads, memory_limit=args.memory) as s:
        from .answers import sections
        from .attribution import attach, attribute

        findings = s.findings(only)
        if args.write_baseline:
            from .baseline import write
            n = write(args.write_baseline, findings)
            print(f"wrote {args.write_baseline}: {n} accepted finding(s) of {len(findings)}")
            return 0
        new, accepted = base.split(findings) if base else (findings, [])
        if args.format in ("junit", "sarif"):
            _ci_format(args, s, new, accepted, only)
        else:
            verdict = s.verdict(findings, args.hypotheses) if not only else None
            who = attribute(s)
            attach(new, who)
            render.emit(args.format, s, new, verdict, examples=args.examples, attribution=who,
                        extra_sections=sections(s))
            if accepted and args.format == "table":
                print(f"{len(accepted)} finding(s) accepted by the baseline {args.baseline} (not counted)")
    worst = {"warning": 0, "error": 1}
    bar = worst[args.fail_on]
    return 1 if any(worst.get(f.severity, 1) >= bar for f in new) else 0


def _ci_format(args, s, new, accepted, only) -> None:
    import sys

    import kvtrace

    from .findings import catalog
    cat = catalog()
    names = list(only) if only else list(cat)
    if args.format == "junit":
        from .format_junit import write
        write(sys.stdout, args.trace, names, s.checks_skipped, new, accepted, args.fail_on, s.checks_partial)
    else:
        from .format_sarif import write
        write(sys.stdout, args.trace, {n: cat[n] for n in names}, new, accepted, bool(args.baseline),
              kvtrace.__version__, s.checks_skipped)
