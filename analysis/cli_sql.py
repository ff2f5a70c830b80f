"""Query a trace with DuckDB SQL. With a query, print the result; without one, open a
read-only interactive prompt with the views loaded.

Views: events, descs, dlists, layouts (raw, each with a shard column) and the derived
tables the checks use: xfers, sync_pairs, clocks, xfer_seen, slot_ev, holdings,
desc_end, end_hold, reads, writes, dl_region, inflight_pairs,
inflight_writes (the overlapping in-flight writes with what each carries).

examples:
  kvtrace sql run.kvtrace "select kind, count(*) from events group by 1 order by 2 desc"
  kvtrace sql run.kvtrace "select request, pool, layer, slot, page from end_hold where side='dst' limit 20"
  kvtrace sql run.kvtrace "select * from xfers" --format csv > xfers.csv
  kvtrace sql run.kvtrace            # interactive; .tables lists views, .quit leaves

The session is read-only and sandboxed: one SELECT-like statement at a time, no file
access beyond the trace's own index (no read_csv('/etc/...'), COPY, ATTACH or INSTALL),
memory bounded (--memory, KVTRACE_DUCKDB_MEMORY, default 40% of RAM). List columns (slots, checksums)
print as JSON arrays in csv.
"""
from __future__ import annotations

import argparse
import json
import sys

#: DuckDB statement types allowed at the prompt / on the command line (read-only; PIVOT
#: parses as MULTI: it creates an enum type first, so it is not among them)
_READ_ONLY_TYPES = frozenset({"SELECT", "EXPLAIN"})


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("query", nargs="?", help="SQL to run (omit for an interactive prompt)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--limit", type=int, default=200, help="rows printed in table format (default 200)")
    p.add_argument("--memory", metavar="SIZE", default=None,
                   help="memory cap of the analysis, e.g. 3GB (default: KVTRACE_DUCKDB_MEMORY or 40%% of RAM); spills under the trace's _index/")
    p.add_argument("--no-derived", action="store_true", help="only the raw views (faster to open)")
    p.set_defaults(_extra=_query_after_options)


def _query_after_options(args, extra: list[str]) -> bool:
    """``kvtrace sql TRACE --format csv "select ..."``: the query may follow the options."""
    if args.query is None and len(extra) == 1 and not extra[0].startswith("-"):
        args.query = extra[0]
        return True
    return False


def _check(sql: str) -> None:
    """One read-only statement, judged by DuckDB's own parser (not by its first word:
    ``select 1; drop view events`` is two statements)."""
    import duckdb

    from kvtrace.errors import UsageError

    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise UsageError(_one_line(e)) from None
    if len(stmts) != 1:
        raise UsageError(f"read-only: give one query at a time (got {len(stmts)} statements)")
    if stmts[0].type.name not in _READ_ONLY_TYPES:
        raise UsageError("read-only: only SELECT/WITH/FROM/DESCRIBE/SHOW/SUMMARIZE/EXPLAIN queries are allowed")


def _one_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _csv_cell(v):
    """A csv cell: lists and structs as JSON (csv has no nested values), bytes as text."""
    if isinstance(v, (list, dict)):
        return json.dumps(v, default=_json_default)
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return v


def _json_default(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    return str(v)


def run_query(session, sql: str, fmt: str = "table", limit: int = 200, file=None) -> int:
    """Run one read-only query and print it; returns the row count."""
    import duckdb

    from kvtrace.errors import UsageError

    _check(sql)
    try:
        t = session.query(sql)
    except duckdb.Error as e:
        raise UsageError(_one_line(e)) from None
    file = file or sys.stdout
    if fmt == "csv":
        import csv
        w = csv.writer(file, lineterminator="\n")
        w.writerow(t.column_names)
        for batch in t.to_batches(max_chunksize=65536):
            cols = [c.to_pylist() for c in batch.columns]
            w.writerows([_csv_cell(v) for v in row] for row in zip(*cols))
    elif fmt == "json":
        json.dump(t.to_pylist(), file, default=_json_default)
        file.write("\n")
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        tbl = Table(show_header=True, header_style="bold")
        for name in t.column_names:
            tbl.add_column(Text(name), overflow="fold")
        for row in t.slice(0, limit).to_pylist():
            tbl.add_row(*(Text("" if v is None else str(v)) for v in row.values()))  # trace text, never markup
        con = Console(file=file)
        con.print(tbl)
        more = f" (first {limit} shown)" if t.num_rows > limit else ""
        con.print(f"[dim]{t.num_rows} row(s){more}[/]")
    return t.num_rows


def _prompt(session, fmt: str, limit: int) -> int:
    from kvtrace.errors import UsageError

    print(f"kvtrace sql — {session.path} (read-only). End statements with ';'. .tables, .quit")
    buf = ""
    while True:
        try:
            line = input("kvtrace> " if not buf else "   ...> ")
        except EOFError:
            print()
            return 0
        if not buf and line.strip() in (".quit", ".exit", "\\q"):
            return 0
        if not buf and line.strip() == ".tables":
            line = "show tables;"
        buf += line + "\n"
        if not buf.strip().endswith(";"):
            continue
        sql, buf = buf.strip().rstrip(";"), ""
        try:
            if sql.lower() == "show tables":
                names = [r[0] for r in session.con.sql(
                    "select table_name from duckdb_tables() union select view_name from duckdb_views() "
                    "where not internal order by 1").fetchall()]
                print(" ".join(names))
                continue
            run_query(session, sql, fmt, limit)
        except UsageError as e:
            print(f"error: {e}")


def run(args) -> int:
    from .session import TraceSession

    with TraceSession(args.trace, memory_limit=args.memory) as s:
        if not args.no_derived:
            s.derive()
        s.sandbox()
        if args.query:
            run_query(s, args.query, args.format, args.limit)
            return 0
        return _prompt(s, args.format, args.limit)
