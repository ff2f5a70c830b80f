"""TraceSession: a trace model (kvtrace.model) with the hazard checks on top.

The UI, the checks and the CLI talk to this interface, never to files:

    s = TraceSession("run.kvtrace")
    s.query("select kind, count(*) from events group by 1")   # -> pyarrow.Table
    s.findings()                                                # -> list[Finding]
    s.checks_skipped                                            # [(check, why)]
    s.verdict()
    s.notes                                                     # truncation / missing shards

Opening, the derived facts (pairs, clocks, descriptor ends, holdings ...) and
capabilities come from :class:`kvtrace.model.TraceModel`; this class only runs the
check SQL of ``sql/*.sql`` over them.
"""
from __future__ import annotations

import dataclasses

from ..model import TraceModel
from .findings import CAPABILITIES, Finding, catalog, fold, rows_to_findings


def _order(f: Finding) -> tuple:
    """Findings' order: errors first, by check, the largest first; then a total order on
    the rest, since two findings of one check can tie on those (the source and destination
    ends of one transfer) and the SQL's order between them varies with DuckDB's threads."""
    return (f.severity != "error", f.check, -f.count, f.request or "",
            [list(map(str, e)) for e in f.events[:1]], f.agent or "", f.pool or "",
            -1 if f.layer is None else f.layer, -1 if f.slot is None else f.slot, f.message)


class TraceSession(TraceModel):
    """A read-only DuckDB session over a trace directory (see TraceModel for the args).

    Raises:
        kvtrace.tracer.TraceError: the trace is missing, foreign or unreadable.
    """

    def __init__(self, path: str, threads: int | None = None, memory_limit: str | None = None,
                 keep_derived: bool | None = None):
        super().__init__(path, threads=threads, memory_limit=memory_limit, keep_derived=keep_derived)
        #: (check name, why it could not run) after findings()
        self.checks_skipped: list[tuple[str, str]] = []
        #: check name -> what it left uncompared, for the checks that compared only part
        #: of their input (analysis/coverage.py); their state is "unknown", not "holds"
        self.checks_partial: dict[str, str] = {}
        self._findings: dict[str, list[Finding]] = {}
        self._ordering_noted = False

    def findings(self, only: list[str] | None = None) -> list[Finding]:
        """Run the checks (all, or the names in ``only``) and return their findings,
        errors first. Checks that cannot run are listed in ``checks_skipped``."""
        cat = catalog()
        names = list(cat) if not only else list(only)
        unknown = [n for n in names if n not in cat]
        if unknown:
            from ..errors import UsageError
            raise UsageError(f"unknown check {unknown[0]!r}; known: {', '.join(cat)}")
        self.derive()
        if not self._ordering_noted:   # ends whose holding is unknown: say so once, with the remedy
            from ..model.cut import ordering_unknowns
            extra = ordering_unknowns(self)
            self.unknowns += extra
            self.notes += [u.note() for u in extra]
            self._ordering_noted = True
        caps = self.capabilities()
        out: list[Finding] = []
        skipped = []
        for n in names:
            c = cat[n]
            missing = [need for need in c.needs if not caps.get(need, False)]
            if missing:
                skipped.append((n, CAPABILITIES[missing[0]]))
                continue
            if n not in self._findings:
                self._findings[n] = rows_to_findings(n, self.query(c.sql))
            # copies: callers annotate findings (attribution, folding); the cache stays as run
            out.extend(dataclasses.replace(f, extra=dict(f.extra)) for f in self._findings[n])
        self._cover([n for n in names if n not in dict(skipped)], skipped)
        self.checks_skipped = skipped
        out.sort(key=_order)   # fold() picks roots and lists what it folds in this order
        out = fold(out)
        from .unattributed import regroup   # findings on transfers with no request: warnings, readable
        out = regroup(self, out)
        out.sort(key=_order)
        return out

    def _cover(self, ran: list[str], skipped: list[tuple[str, str]]) -> None:
        """Checks that compared nothing of their input join ``skipped`` (unless they found
        something); those that compared part of it go to ``checks_partial``, with a note."""
        from .coverage import apply
        left, partial = apply(self, ran)
        for n, why in left.items():
            if self._findings.get(n):
                partial[n] = why
            else:
                skipped.append((n, why))
        for n, text in partial.items():
            note = f"{text} — that check's result covers only what it compared"
            if note not in self.notes:
                self.notes.append(note)
        self.checks_partial = partial

    def attribute(self, findings: list[Finding]) -> list:
        """Who wrote the bytes of each corrupted read (attribution.py); each finding of
        ``findings`` gets its requests' attributions in ``extra``. Returns them all."""
        from .attribution import attach, attribute
        who = attribute(self)
        attach(findings, who)
        return who

    def verdict(self, findings: list[Finding] | None = None, hypotheses: list[str] | None = None):
        """The root causes found and, for the hypothesis files that apply (``hypotheses``:
        names or paths; default: the shipped ones the trace's layout makes relevant),
        which hypothesis the evidence supports and which it rules out."""
        from .verdict import verdict
        return verdict(self, self.findings() if findings is None else findings, hypotheses)
