"""SqlConsole: read-only SQL over the trace views (events, descs, dlists, layouts, and
``tl``: events in timeline order with ``ord``); results in a table, errors inline."""
from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Static

from ..errors import UsageError

MAX_ROWS = 500   # a console result is for reading: DataTable keeps rows as Python objects
READ_ONLY = ("SELECT", "EXPLAIN")


class ReadOnlyError(UsageError, ValueError):
    """A statement that would change the session."""


def run_readonly(con, sql: str) -> tuple[list[str], list[tuple], int]:
    """Run one read-only statement on cursor ``con``; returns (columns, first rows, total).

    Raises:
        ReadOnlyError: not a single SELECT/EXPLAIN statement.
        duckdb.Error: the query failed (message shown inline by the console).
    """
    stmts = con.extract_statements(sql)
    if len(stmts) != 1:
        raise ReadOnlyError("one statement at a time")
    kind = str(stmts[0].type).rsplit(".", 1)[-1]
    if kind not in READ_ONLY:
        raise ReadOnlyError(f"read-only console: {kind} statements are not allowed")
    rel = con.sql(sql)
    cols = list(rel.columns)
    rows = rel.limit(MAX_ROWS + 1).fetchall()
    return cols, rows[:MAX_ROWS], len(rows)


class SqlConsole(Vertical):
    """An input line, a status line (errors inline) and the result table."""

    def __init__(self, con, **kw):
        super().__init__(**kw)
        self.con = con

    def compose(self):
        yield Input(placeholder="SELECT kind, count(*) FROM tl GROUP BY 1   (Enter runs)", id="sql-input")
        yield Static(Text("views: events descs dlists layouts tl (timeline order, column ord)", style="grey50"),
                     id="sql-status")
        yield DataTable(id="sql-result", zebra_stripes=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "sql-input":
            event.stop()
            self.run_query(event.value)

    def run_query(self, sql: str) -> None:
        """Run ``sql`` and show its rows or its error."""
        import duckdb

        status = self.query_one("#sql-status", Static)
        table = self.query_one("#sql-result", DataTable)
        if not sql.strip():
            return
        try:
            cols, rows, n = run_readonly(self.con, sql)
        except (ReadOnlyError, duckdb.Error) as e:
            status.update(Text(f"error: {str(e).strip().splitlines()[0]}", style="bold red"))
            return
        table.clear(columns=True)
        table.add_columns(*cols)
        for r in rows:
            table.add_row(*(Text("NULL" if v is None else str(v)) for v in r))  # trace text, never markup
        more = f" (first {MAX_ROWS} shown)" if n > MAX_ROWS else ""
        status.update(Text(f"{min(n, MAX_ROWS)} row{'s' * (n != 1)}{more}", style="green"))
