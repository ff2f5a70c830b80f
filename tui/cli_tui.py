"""Step through a trace in the terminal: timeline (happens-before order), slot map,
transfer inspector, findings and a SQL console. The first open builds an index under
the trace's _index/ folder; later opens reuse it.

Keys: j/k step, n/p next/previous event of the followed request/slot/transfer, / filter,
: jump, f/t/s/e panels, ? help, q quit."""
from __future__ import annotations


def add_arguments(parser) -> None:
    parser.add_argument("trace", help="a trace directory (NAME.kvtrace)")
    parser.add_argument("--no-checks", action="store_true",
                        help="do not run the hazard checks (findings panel stays empty)")
    parser.add_argument("--memory", metavar="SIZE", default=None,
                        help="memory cap of the analysis, e.g. 3GB (default: KVTRACE_DUCKDB_MEMORY or 40%% of RAM); spills under the trace's _index/")
    parser.add_argument("--jump", metavar="WHERE", help="start at a row, shard:seq, 'seq N' or @time")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from ..analysis.session import TraceSession   # duckdb + pyarrow: ~0.3 s
    from .app import KvtraceApp
    from .source import TimelineSource

    import sys

    session = TraceSession(args.trace, memory_limit=args.memory)     # a bad trace raises here: one line, exit 2
    if not session.timeline_ready():
        # ~30 s at 10M events, once: say so rather than look hung
        print(f"kvtrace tui: building the timeline index of {args.trace} (first open only)…", file=sys.stderr)
    source = TimelineSource(session, sandbox=True, background=True)   # the SQL console reads nothing outside the trace
    if source.total == 0:
        raise UsageError(f"{args.trace}: the trace has no events")
    app = KvtraceApp(source, run_findings=not args.no_checks)
    if args.jump:
        try:
            target = source.resolve_jump(args.jump)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if target is not None:
            app.call_later(lambda: app.timeline.move_to_ord(target))
    try:
        app.run()
    finally:
        source.close()
    for note in session.notes:
        print(f"note: {note}")
    return 0
