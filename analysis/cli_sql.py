"""Query a trace with DuckDB SQL. With a query, print the result; without one, open a
read-only interactive prompt with the views loaded.

Views: events, descs, dlists, layouts (raw, each with a shard column) and the derived
tables the checks use: xfers, sync_pairs, clocks, xfer_seen, slot_ev, holdings,
desc_end, end_hold, reads, writes, dl_region, inflight_pairs.

examples:
  kvtrace sql run.kvtrace "select kind, count(*) from events group by 1 order by 2 desc"
  kvtrace sql run.kvtrace "select request, pool, layer, slot, page from end_hold where side='dst' limit 20"
  kvtrace sql run.kvtrace --format csv "select * from xfers" > xfers.csv
  kvtrace sql run.kvtrace            # interactive; .tables lists views, .quit leaves
"""
from __future__ import annotations

import argparse
import re
import sys

#: statements allowed at the prompt / on the command line (the session is read-only)
_READ_ONLY = re.compile(r"^\s*(select|with|from|describe|show|summarize|pivot|unpivot|explain|values|table)\b", re.I)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("query", nargs="?", help="SQL to run (omit for an interactive prompt)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--limit", type=int, default=200, help="rows printed in table format (default 200)")
    p.add_argument("--no-derived", action="store_true", help="only the raw views (faster to open)")


def _check(sql: str) -> None:
    from kvtrace.errors import UsageError

    if not _READ_ONLY.match(sql):
        raise UsageError("read-only: only SELECT/WITH/DESCRIBE/SHOW/SUMMARIZE/EXPLAIN queries are allowed")


def run_query(session, sql: str, fmt: str = "table", limit: int = 200, file=None) -> int:
    """Run one read-only query and print it; returns the row count."""
    import duckdb

    from kvtrace.errors import UsageError

    _check(sql)
    try:
        t = session.query(sql)
    except duckdb.Error as e:
        raise UsageError(str(e).strip().splitlines()[0]) from None
    file = file or sys.stdout
    if fmt == "csv":
        import pyarrow.csv as pacsv
        buf = __import__("io").BytesIO()
        pacsv.write_csv(t, buf)
        file.write(buf.getvalue().decode())
    elif fmt == "json":
        import json
        json.dump(t.to_pylist(), file, default=str)
        file.write("\n")
    else:
        from rich.console import Console
        from rich.table import Table

        tbl = Table(show_header=True, header_style="bold")
        for name in t.column_names:
            tbl.add_column(name, overflow="fold")
        for row in t.slice(0, limit).to_pylist():
            tbl.add_row(*("" if v is None else str(v) for v in row.values()))
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

    with TraceSession(args.trace) as s:
        if not args.no_derived:
            s.derive()
        if args.query:
            run_query(s, args.query, args.format, args.limit)
            return 0
        return _prompt(s, args.format, args.limit)
