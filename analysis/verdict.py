"""The verdict: the root causes the checks found, then any hypotheses that apply.

By default the verdict speaks of the findings: one line per root cause (a check whose
findings remain after consequences were folded into their causes), or that the checks
that ran found nothing. Hypotheses are data (hypothesis_files.py): a file applies when
the user names it (``kvtrace check --hypotheses NAME|FILE``) or when its
``relevant_when`` fact is non-zero for the trace (e.g. pools with different slot counts).

Three values, never more than the facts allow. A hypothesis is *supported* when a check
of its evidence proved a violation on a request's transfer from recorded facts; *ruled
out* only when every evidence check ran and found nothing over facts that are all present
and ordered (a complete trace, nothing unknown: see the model's cut and unknowns); and
*untestable* otherwise, saying why (a check that could not run, a fact that is absent, a
missing shard or cut tail, an unrecorded message, findings only on transfers that carry
no request).
"""
from __future__ import annotations

import dataclasses

from .facts import facts, measure
from .findings import Finding, catalog
from .hypothesis_files import HypothesisFile, HypothesisSpec, builtin_names, load


@dataclasses.dataclass
class Hypothesis:
    """One hypothesis and what the evidence says about it."""

    name: str
    status: str                 #: "supported" | "ruled out" | "untestable"
    reason: str                 #: one sentence
    findings: int = 0
    investigation: str = ""     #: the hypothesis file it comes from


@dataclasses.dataclass
class RootCause:
    """One check's findings as a cause of what went wrong."""

    check: str
    severity: str
    findings: int
    requests: int
    summary: str
    pattern: str                #: what explains many findings at once (e.g. one wrong stride), or ""
    example: str


@dataclasses.dataclass
class Verdict:
    root_causes: list[RootCause]
    checks_run: list[str]
    skipped: list[tuple[str, str]]
    investigations: list[tuple[str, str]]        #: (name, description) of the files applied
    hypotheses: list[Hypothesis]
    unknown: bool = False                        #: some facts are missing or unordered
    #: every check: "violated" (proven on a request's transfer), "unknown" (nothing proven,
    #: but facts it needs are missing or unordered, or its findings carry no request),
    #: "holds" (nothing found over complete, ordered facts) or "skipped" (could not run)
    checks: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def supported(self) -> list[Hypothesis]:
        return [h for h in self.hypotheses if h.status == "supported"]

    def lines(self) -> list[str]:
        """Human-readable verdict: a headline, one line per root cause, then hypotheses."""
        rc = self.root_causes
        if rc:
            out = [f"VERDICT: {len(rc)} root cause{'s' if len(rc) > 1 else ''} found: "
                   + ", ".join(r.check for r in rc) + "."]
            for r in rc:
                out.append(f"  {r.check} ({r.severity}): {r.findings} finding(s) over {r.requests} request(s)"
                           f"{r.pattern} — {r.summary}; e.g. {r.example}")
        else:
            out = [f"VERDICT: no hazard found by the {len(self.checks_run)} check(s) that ran"
                   + (f"; {len(self.skipped)} could not run (see skipped)" if self.skipped else "")
                   + ("; but facts are missing or unordered, so that proves nothing (see the unknown notes)."
                      if self.unknown else ".")]
        unknown = [c for c, st in self.checks.items() if st == "unknown"]
        if unknown:
            out.append(f"  unknown: {len(unknown)} check(s) prove no violation but cannot say it holds "
                       f"(facts missing or unordered, findings only on transfers with no request, or part of "
                       f"their input not compared: see the notes): {', '.join(unknown)}")
        for name, desc in self.investigations:
            out.append(f"Hypotheses ({name}): {desc}")
            for h in self.hypotheses:
                if h.investigation == name:
                    out.append(f"  {h.status:>10}: {h.name} — {h.reason}")
        return out

    def to_dict(self) -> dict:
        return {"root_causes": [dataclasses.asdict(r) for r in self.root_causes],
                "checks_run": list(self.checks_run), "skipped": [list(s) for s in self.skipped],
                "investigations": [{"name": n, "description": d} for n, d in self.investigations],
                "hypotheses": [dataclasses.asdict(h) for h in self.hypotheses],
                "checks": dict(self.checks)}


def _strides(hits: list[Finding]) -> str:
    """How many findings one wrong slot count explains, when the checks named a stride."""
    named = [(f.extra.get("stride"), f.extra.get("stride_pool"), f.pool, f.extra.get("pool_slots"))
             for f in hits if f.extra.get("stride") is not None]
    if not named:
        return ""
    top = max(set(named), key=named.count)
    m, m_pool, pool, real = top
    return (f", {named.count(top)} of them explained by pool {m_pool}'s slot count (M={m}) "
            f"applied to pool {pool} (M={real})")


def root_causes(findings: list[Finding]) -> list[RootCause]:
    cat = catalog()
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        if not f.extra.get("unattributed"):   # whose data they touch is unknown: not a root cause
            by_check.setdefault(f.check, []).append(f)
    out = []
    for check, fs in by_check.items():
        first = next((f for f in fs if f.extra.get("stride") is not None), fs[0])
        out.append(RootCause(check, fs[0].severity, len(fs), len({f.request for f in fs}),
                             cat[check].summary if check in cat else check, _strides(fs), first.message))
    return out


def check_states(skipped: dict[str, str], by_check: dict[str, list[Finding]], gap: str,
                 folded: dict[str, set[str]], partial: dict[str, str] | None = None) -> dict[str, str]:
    """Three-valued truth per check (see Verdict.checks); a check whose findings were folded
    into their root cause's is violated too; one that compared only part of its input
    (``partial``, see analysis/coverage.py) is unknown when it found nothing."""
    out = {}
    for c in catalog():
        fs = by_check.get(c, [])
        if c in skipped:
            out[c] = "skipped"
        elif any(f.request is not None for f in fs) or c in folded:
            out[c] = "violated"
        elif fs or gap or c in (partial or {}):
            out[c] = "unknown"
        else:
            out[c] = "holds"
    return out


def _partial(gap: str) -> str:
    return " (in the part of this partial trace that can be analysed; see the unknown notes)" if gap else ""


def unknown_because(session) -> str:
    """Why finding nothing proves nothing in this trace ('' when every fact is present and ordered)."""
    parts = [u.what for u in getattr(session, "unknowns", [])]
    if not parts:
        return ""
    more = f"; and {len(parts) - 3} more (see the notes)" if len(parts) > 3 else ""
    return "the facts it needs are not all recorded: " + "; ".join(parts[:3]) + more


def judge(spec: HypothesisSpec, by_check: dict[str, list[Finding]], skipped: dict[str, str],
          folded: dict[str, set[str]], counts: dict[str, int], investigation: str, gap: str = "",
          partial: dict[str, str] | None = None) -> Hypothesis:
    """One hypothesis from the findings, the checks that could not run and the facts."""
    all_hits = [f for c in spec.evidence for f in by_check.get(c, [])]
    hits = [f for f in all_hits if f.request is not None]
    if all_hits and not hits:   # never supported from transfers whose request is unknown alone
        n = sum(f.count for f in all_hits)
        return Hypothesis(spec.name, "untestable",
                          f"its only {len(all_hits)} finding(s) ({n} instance(s)) are on transfers that carry no request, "
                          "so whose data they touch is unknown — record the request with each post: see docs/hooks.md",
                          len(all_hits), investigation)
    if hits:
        first = next((f for f in hits if f.extra.get("stride") is not None), hits[0])
        reqs = len({f.request for f in hits})
        reason = (f"{len(hits)} finding(s) over {reqs} request(s) ({', '.join(sorted({f.check for f in hits}))})"
                  f"{_strides(hits)}; e.g. {first.message}")
        return Hypothesis(spec.name, "supported", reason, len(hits), investigation)
    ran = [c for c in spec.evidence if c not in skipped]
    if not ran:
        return Hypothesis(spec.name, "untestable", skipped[spec.evidence[0]] + _partial(gap), 0, investigation)
    absent = [n for n in spec.needs if not counts.get(n)]
    if absent:
        return Hypothesis(spec.name, "untestable", facts()[absent[0]].absent + _partial(gap), 0, investigation)
    if gap:
        return Hypothesis(spec.name, "untestable", f"no violation found, but {gap}", 0, investigation)
    reason = spec.ruled_out.format(checks=", ".join(ran), **counts)
    not_run = [f"{c} ({skipped[c]})" for c in spec.evidence if c in skipped]
    in_part = [partial[c] for c in spec.evidence if c in (partial or {})]
    if not_run or in_part:
        # silence of the checks that ran says nothing of what the others would have seen
        # (e.g. decode-side reuse where no layout maps decode's slots, or a completion that
        # precedes its data, which only the checksums show): not ruled out
        if not_run:
            reason += "; but that does not rule it out: not checked: " + "; ".join(not_run)
        if in_part:
            reason += ("; but that does not rule it out" if not not_run else "") \
                      + "; checked in part only: " + "; ".join(in_part)
        return Hypothesis(spec.name, "untestable", reason, 0, investigation)
    explained = sorted(f"{c} (explained by {', '.join(sorted(folded[c]))})" for c in spec.evidence if c in folded)
    if explained:
        reason += "; its only hits are consequences of another cause: " + ", ".join(explained)
    return Hypothesis(spec.name, "ruled out", reason, 0, investigation)


def applicable(session, asked: list[str] | None) -> list[HypothesisFile]:
    """The hypothesis files to judge: those ``asked`` for (names or paths; ``["none"]``
    for none), else every shipped file whose ``relevant_when`` fact is non-zero."""
    if asked:
        return [] if asked == ["none"] else [load(a) for a in asked]
    files = [load(n) for n in builtin_names()]
    rel = measure(session, [f.relevant_when for f in files if f.relevant_when])
    return [f for f in files if f.relevant_when and rel.get(f.relevant_when)]


def verdict(session, findings: list[Finding], hypotheses: list[str] | None = None) -> Verdict:
    """The verdict over ``findings`` (see the module doc); ``hypotheses`` as in applicable()."""
    skipped = dict(session.checks_skipped)
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check, []).append(f)
    folded: dict[str, set[str]] = {}   # consequence check -> root-cause checks that explain it
    for f in findings:
        for g in f.extra.get("folded") or []:
            folded.setdefault(g["check"], set()).add(f.check)
    files = applicable(session, hypotheses)
    counts = measure(session, [n for hf in files for h in hf.hypotheses for n in h.needs])
    gap = unknown_because(session)
    partial = dict(getattr(session, "checks_partial", {}))
    judged = [judge(h, by_check, skipped, folded, counts, hf.name, gap, partial)
              for hf in files for h in hf.hypotheses]
    ran = [c for c in catalog() if c not in skipped]
    return Verdict(root_causes(findings), ran, list(session.checks_skipped),
                   [(hf.name, hf.description) for hf in files], judged, bool(gap),
                   check_states(skipped, by_check, gap, folded, partial))
