"""Write a self-contained HTML report of a trace.

  kvtrace report TRACE -o report.html

One file, plots embedded: the verdict, slot occupancy over time per agent and pool,
transfer latency and size distributions, throughput, and the findings timeline and table.
"""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("-o", "--output", default=None, help="HTML file to write (default: TRACE's name + .html)")
    p.add_argument("--no-findings", action="store_true", help="skip running the checks")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from .export_paths import check_output_file

    out = args.output
    if out is None:
        base = args.trace.rstrip("/")
        out = (base[: -len(".kvtrace")] if base.endswith(".kvtrace") else base) + ".html"
    out = check_output_file(out)
    from .report import write_report
    from .session import TraceSession

    with TraceSession(args.trace) as s:
        try:
            data = write_report(s, out, args.trace, with_findings=not args.no_findings)
        except OSError as e:
            raise UsageError(f"{out}: cannot write ({e.strerror or e})") from None
    print(f"wrote {out}: {len(data['findings'])} finding(s), verdict: {data['verdict'].splitlines()[0]}")
    return 0
