"""The header of a check or fact file: ``-- key: value`` lines at the top of a ``.sql`` file,
a value continued on following ``--   `` lines where the file format allows it."""
from __future__ import annotations

import re


def read_header(text: str, keys: tuple[str, ...], continued: tuple[str, ...] | None = None) -> dict[str, str]:
    """The values of ``keys`` in the leading comment block of ``text``.

    ``continued``: the keys whose value may go on over ``--   `` lines (default: every key).
    A line that is neither a key nor a continuation ends the current value; the first
    non-comment line ends the header.
    """
    pattern = re.compile(r"^--\s*(" + "|".join(map(re.escape, keys)) + r"):\s*(.*)$")
    meta: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        m = pattern.match(line)
        if m:
            key = m.group(1)
            meta[key] = m.group(2).strip()
        elif key and (continued is None or key in continued) and line.startswith("--   "):
            meta[key] += " " + line[2:].strip()
        else:
            key = None
    return meta


def names(value: str) -> tuple[str, ...]:
    """A comma-separated header value as a tuple of names."""
    return tuple(n.strip() for n in value.split(",") if n.strip())


def sql_files(prefix: str) -> list[str]:
    """The texts of the analysis SQL files (``kvtrace.analysis.sql``) whose names start with
    ``prefix``, in name order (facts: ``fact_``, coverage: ``coverage_``)."""
    import importlib.resources
    files = importlib.resources.files("kvtrace.analysis.sql")
    return [f.read_text() for f in sorted(files.iterdir(), key=lambda p: p.name)
            if f.name.startswith(prefix) and f.name.endswith(".sql")]
