"""Bound what SQL typed by a user (``kvtrace sql``, the TUI's console) can reach.

A trace is input people share, and a query is input too: once the model's views exist,
DuckDB may touch files only under the trace's index and its own spill folder (no
``read_csv('/etc/...')``, ``COPY ... TO``, ``ATTACH``, ``INSTALL``), and the settings are
locked so a query cannot undo that. Memory is already bounded by the model's
``memory_limit``.
"""
from __future__ import annotations

import os


def sandbox(con, *dirs: str) -> None:
    """Restrict connection ``con`` (and its cursors) to files under ``dirs`` and DuckDB's
    temp directory, then lock its configuration. Call after every view is created."""
    spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    allowed = [os.path.abspath(d) for d in (*dirs, spill) if d]
    con.execute("SET allowed_directories = ?", [allowed])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")
