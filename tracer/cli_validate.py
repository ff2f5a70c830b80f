"""Check trace directories against the trace format contract (docs/format.md).

  kvtrace validate run.kvtrace [more.kvtrace ...]

Prints "TRACE: conforms" for each trace that follows the contract (with its notes:
what the format allows but reports, such as a shard that was not closed). For one that
does not, every problem is one line on stderr and the exit status is 2. It checks the
format only; whether the recorded program was correct is `kvtrace check`.
"""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("traces", nargs="+", metavar="TRACE", help="trace directory (NAME.kvtrace)")
    p.add_argument("-q", "--quiet", action="store_true", help="print problems only")


def run(args) -> int:
    import sys

    from .validate import validate

    status = 0
    for trace in args.traces:
        v = validate(trace)
        for p in v.problems:
            print(f"kvtrace validate: {p}", file=sys.stderr)
        if v.problems:
            status = 2
            continue
        if not args.quiet:
            for n in v.notes:
                print(f"note: {n}")
            print(f"{trace}: conforms")
    return status
