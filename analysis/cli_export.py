"""Export a trace for other tools.

  kvtrace export TRACE --format perfetto -o run.pftrace      open in ui.perfetto.dev
  kvtrace export TRACE --format chrome-json -o run.json      Perfetto UI or chrome://tracing
  kvtrace export TRACE --format parquet -o run_parquet/      hive-partitioned by shard

Perfetto and Chrome JSON show one process per agent: transfers as slices from post to
completion with flow arrows to the target's notification and to the reads that consumed
the data, requests as async slices, slot occupancy per pool as counters, and findings as
instant events carrying their explanation.
"""
from __future__ import annotations

FORMATS = {"perfetto": ".pftrace", "chrome-json": ".json", "parquet": "_parquet"}


def add_arguments(p) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--format", "-f", default="perfetto", metavar="FORMAT",
                   help="perfetto (protobuf, default) | chrome-json | parquet")
    p.add_argument("-o", "--output", default=None,
                   help="output file (perfetto, chrome-json) or directory (parquet); default beside the trace")
    p.add_argument("--force", action="store_true", help="parquet: write into a non-empty directory")
    p.add_argument("--no-findings", action="store_true", help="skip running the checks (faster)")


def _default_output(trace: str, fmt: str) -> str:
    base = trace.rstrip("/")
    if base.endswith(".kvtrace"):
        base = base[: -len(".kvtrace")]
    return base + FORMATS[fmt]


def run(args) -> int:
    import os

    from kvtrace.errors import UsageError

    from .export_paths import check_output_file, make_output_dir

    fmt = args.format.lower()
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {args.format!r}; choose one of: {', '.join(FORMATS)}")
    out = args.output or _default_output(args.trace, fmt)
    out = make_output_dir(out, args.force) if fmt == "parquet" else check_output_file(out)
    try:
        if fmt == "parquet":
            from ..tracer.reader import open_trace
            from .export_parquet import write_parquet

            trace = open_trace(args.trace)
            counts = write_parquet(trace, out)
            print(f"wrote {out}: " + ", ".join(f"{t} {n} rows" for t, n in counts.items())
                  + f" across {len(trace.shards)} shard(s)")
            return 0
        from .export_model import build_timeline
        from .session import TraceSession

        with TraceSession(args.trace) as s:
            tl = build_timeline(s, with_findings=not args.no_findings)
        if fmt == "perfetto":
            from .export_perfetto import write_perfetto
            n = write_perfetto(tl, out)
            what = f"{n} packets"
        else:
            from .export_chrome import write_chrome_json
            n = write_chrome_json(tl, out, {"trace": os.path.abspath(args.trace)})
            what = f"{n} events"
    except OSError as e:
        raise UsageError(f"{out}: cannot write ({e.strerror or e})") from None
    print(f"wrote {out}: {what}, {len(tl.agents)} agent(s), {len(tl.flows)} flows, verdict: {tl.verdict.splitlines()[0]}")
    return 0
