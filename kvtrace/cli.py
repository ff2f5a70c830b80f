"""`kvtrace` command line. Each subcommand lives in its own light module exposing
``add_arguments(parser)`` and ``run(args) -> int``; heavy imports happen inside ``run``
so ``kvtrace --help`` stays instant."""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from .errors import KvtraceError, ResourceError

#: (command, module, one-line help) in the order a user meets them
COMMANDS = [
    ("record", "kvtrace.tracer.cli_record", "record a PD session (reference engine) or any NIXL program: record -- CMD"),
    ("dump", "kvtrace.tracer.cli_dump", "write a flight recorder's window now: dump SESSION | dump PID"),
    ("info", "kvtrace.tracer.cli_info", "summarize a trace: shards, events, requests, transfers, truncation"),
    ("validate", "kvtrace.tracer.cli_validate", "check a trace against the trace format contract (docs/format.md)"),
    ("check", "kvtrace.analysis.cli_check", "run the hazard checks and print findings and a verdict"),
    ("watch", "kvtrace.analysis.cli_watch", "follow a trace being written and print each new finding as it lands"),
    ("diff", "kvtrace.analysis.cli_diff", "compare two traces: layouts, configuration, findings per check"),
    ("sql", "kvtrace.analysis.cli_sql", "query a trace with DuckDB SQL (interactive without a query)"),
    ("replay", "kvtrace.replay.cli_replay", "re-execute a trace's transfers under a seeded schedule"),
    ("explore", "kvtrace.replay.cli_explore", "replay many seeds and summarize the failing schedules"),
    ("minimize", "kvtrace.replay.cli_minimize", "shrink a failing schedule to the reorderings that matter"),
    ("tui", "kvtrace.tui.cli_tui", "step through a trace in the terminal UI"),
    ("export", "kvtrace.analysis.cli_export", "export to Perfetto, Chrome JSON or Parquet"),
    ("report", "kvtrace.analysis.cli_report", "write a self-contained HTML report with plots"),
    ("sweep", "kvtrace.analysis.cli_sweep", "record and check a workload across concurrencies"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kvtrace",
        description="Record, check, replay and inspect disaggregated prefill/decode KV-cache transfers.",
        epilog="Typical session: kvtrace record -o s.kvtrace; kvtrace check s.kvtrace; "
               "kvtrace replay s.kvtrace --scheduler pct --seed 3 -o r.kvtrace; kvtrace tui s.kvtrace")
    parser.add_argument("--version", action="version", version="kvtrace " + __import__("kvtrace").__version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, modname, helptext in COMMANDS:
        if importlib.util.find_spec(modname) is None:
            continue
        mod = importlib.import_module(modname)
        p = sub.add_parser(name, help=helptext, description=(mod.__doc__ or helptext).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # a command may take positionals given after its options (argparse binds an optional
    # positional before the options): it sets _extra to claim them
    if extra and not (getattr(args, "_extra", None) and args._extra(args, extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KvtraceError as e:
        # the one place a domain error becomes output: one line, exit 2
        print(f"kvtrace {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kvtrace {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:   # noqa: BLE001 (a third-party error the user can act on, else re-raised)
        err = _actionable(e)
        if err is None:
            raise
        print(f"kvtrace {args.command}: {err}", file=sys.stderr)
        return 2


def _actionable(e: Exception) -> KvtraceError | None:
    """A database error the user can fix, as a domain error (None: not one): DuckDB running
    out of memory under the cap (--memory, KVTRACE_DUCKDB_MEMORY) ends in one line saying
    how to give it more, not a traceback."""
    duckdb = sys.modules.get("duckdb")   # only a command that ran DuckDB can raise its errors
    if duckdb is None or not isinstance(e, getattr(duckdb, "OutOfMemoryException", ())):
        return None
    first = str(e).strip().splitlines()[0] if str(e).strip() else "out of memory"
    return ResourceError(f"the analysis ran out of memory under its cap ({first}); "
                         "give it more with --memory (e.g. --memory 2GB) or KVTRACE_DUCKDB_MEMORY")


if __name__ == "__main__":
    sys.exit(main())
