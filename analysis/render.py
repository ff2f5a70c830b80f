"""Output of `kvtrace check`: a rich table grouped by check, JSON, or CSV."""
from __future__ import annotations

import csv
import json
import sys

from .findings import Check, Finding


def _ev(events: list[tuple[str, int]], n: int = 3) -> str:
    return " ".join(f"{s}#{q}" for s, q in events[:n])


def _folded(f: Finding) -> str:
    fo = f.extra.get("folded") or []
    if not fo:
        return ""
    parts = {}
    for g in fo:
        parts[g["check"]] = parts.get(g["check"], 0) + 1
    return " [also explains: " + ", ".join(f"{k} x{v}" for k, v in parts.items()) + "]"


def _where(f: Finding) -> str:
    """request · agent · pool/layer/slot · events, leaving out what the finding does not know."""
    parts = [f.request if f.request is not None else "(no request)"]
    if f.agent:
        parts.append(f.agent)
    if f.pool is not None:
        parts.append("/".join(str(x) for x in (f.pool, f.layer, f.slot) if x is not None))
    parts.append(_ev(f.events))
    return " · ".join(parts)


def explain(name: str, cat: dict[str, Check]) -> int:
    """Print what a check finds (``all``: one line per check)."""
    from kvtrace.errors import UsageError

    if name == "all":
        for c in cat.values():
            print(f"{c.name:28} {c.severity:8} {c.summary}")
        return 0
    if name not in cat:
        raise UsageError(f"unknown check {name!r}; known: {', '.join(cat)}")
    c = cat[name]
    print(f"{c.name} ({c.severity}; needs {', '.join(c.needs) or 'events only'})\n")
    print(c.explain)
    from .coverage import coverages
    cov = coverages().get(name)
    if cov is not None:   # what it cannot compare: said per trace, never read as "holds"
        print(f"\nNot compared, and said so (skipped when none of its {cov.items} can be, else a note and "
              f"the state unknown): {cov.items} where {cov.left_out}"
              + (f"; and {cov.items} where {cov.unmapped}" if cov.unmapped else "") + ".")
    return 0


def emit(fmt: str, session, findings: list[Finding], verdict, examples: int = 3, file=None,
         attribution=None, extra_sections=None) -> None:
    """Write findings (and the verdict, in table form) in ``fmt``. ``attribution``: the
    corrupted reads with whose bytes they hold (analysis.attribution); ``extra_sections``:
    JSON key → (title, JSON value, text lines) of further answers (analysis.answers)."""
    file = file or sys.stdout
    attribution = attribution or []
    extra_sections = extra_sections or {}
    if fmt == "json":
        json.dump({"trace": session.path, "notes": session.notes,
                   "skipped": [{"check": c, "why": w} for c, w in session.checks_skipped],
                   "compared_in_part": [{"check": c, "why": w}
                                        for c, w in getattr(session, "checks_partial", {}).items()],
                   "findings": [f.to_dict() for f in findings],
                   "attribution": [a.to_dict() for a in attribution],
                   **{k: v[1] for k, v in extra_sections.items()},
                   "verdict": verdict.to_dict() if verdict else None}, file, indent=1, default=str)
        file.write("\n")
        return
    if fmt == "csv":
        w = csv.writer(file)
        w.writerow(["check", "severity", "agent", "request", "pool", "layer", "slot", "slots", "count", "events", "message"])
        for f in findings:
            w.writerow([f.check, f.severity, f.agent, f.request, f.pool, f.layer, f.slot,
                        " ".join(map(str, f.slots)), f.count, _ev(f.events, 99), f.message])
        return
    _table(session, findings, verdict, examples, file, attribution, extra_sections)


def _table(session, findings, verdict, examples, file, attribution=(), extra_sections=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    con = Console(file=file, width=160 if not file.isatty() else None)
    for n in session.notes:  # notes quote names from the trace: escaped, never markup
        con.print(f"[yellow]note:[/] {escape(n)}", markup=True, highlight=False)
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(f.check, []).append(f)
    if not findings:
        con.print("[green]No findings.[/]")
    else:
        t = Table(title=f"{len(findings)} finding(s) in {session.path}", show_lines=True)
        for col in ("check", "sev", "findings", "affected", "example (request · agent · pool/layer/slot · events)", "message"):
            t.add_column(col, overflow="fold")
        for name, fs in groups.items():
            for i, f in enumerate(fs[:examples]):
                where = _where(f)
                who = f.extra.get("attribution") or []
                t.add_row(name if i == 0 else "", f.severity if i == 0 else "",
                          str(len(fs)) if i == 0 else "", str(sum(x.count for x in fs)) if i == 0 else "",
                          Text(where), Text(f.message + _folded(f) + (f"\nwho wrote these bytes: {who[0]}" if who else "")))
            if len(fs) > examples:
                t.add_row("", "", "", "", f"… {len(fs) - examples} more", "")
        con.print(t)
    if attribution:
        from .attribution import summary

        con.print(f"[bold]Who wrote these bytes[/] ({len(attribution)} corrupted read(s), grouped; "
                  "--format json lists each):", markup=True, highlight=False)
        for n, line in summary(attribution):
            con.print(f"  {n:5d} × {line}", markup=False, highlight=False)
    for title, _value, lines in (extra_sections or {}).values():
        if lines:
            con.print(f"[bold]{title}[/]:", markup=True, highlight=False)
            for line in lines:
                con.print(f"  {line}", markup=False, highlight=False)
    for c, why in session.checks_skipped:
        con.print(Text(f"skipped {c}: {why}", style="dim"))
    if verdict is not None:
        for line in verdict.lines():
            con.print(line, markup=False, highlight=False)
