"""The verdict on the seeds' question: bf16 index-K corrupts only under PD at high
concurrency — is it the uniform slot count, slot reuse before the read, or a completion
signal that precedes the data?

Each hypothesis maps to the checks whose findings are its evidence. Three values, never
more than the facts allow: *supported* when those checks proved a violation of a
request's transfer from recorded facts; *ruled out* only when they all ran over every fact
they need, present and ordered (a complete trace, nothing unknown) and found nothing;
otherwise *untestable*, because of what is missing (a shard, a cut tail, an unrecorded
message, transfers with no request).
"""
from __future__ import annotations

import dataclasses

from .findings import Finding, catalog

#: hypothesis → (checks that are evidence for it, what "nothing found" was measured over)
HYPOTHESES = {
    "uniform slot count": ("layer_offset_mismatch",),
    "slot reuse before read": ("slot_reuse_before_read", "write_after_free", "src_free_before_done"),
    "completion before data": ("read_before_done", "read_undelivered", "checksum_mismatch"),
}


@dataclasses.dataclass
class Hypothesis:
    """One suspect and what the evidence says about it."""

    name: str
    status: str                 #: "supported" | "ruled out" | "untestable"
    reason: str                 #: one sentence
    findings: int = 0


@dataclasses.dataclass
class Verdict:
    """All three suspects, in the seeds' order."""

    hypotheses: list[Hypothesis]

    @property
    def supported(self) -> list[Hypothesis]:
        return [h for h in self.hypotheses if h.status == "supported"]

    def lines(self) -> list[str]:
        """Human-readable verdict, one line per hypothesis plus a summary."""
        out = []
        sup = self.supported
        if sup:
            out.append("VERDICT: the evidence supports " + " and ".join(h.name for h in sup) + ".")
        elif all(h.status == "ruled out" for h in self.hypotheses):
            out.append("VERDICT: all three suspects are ruled out for this trace.")
        else:
            out.append("VERDICT: no suspect is supported by this trace.")
        for h in self.hypotheses:
            out.append(f"  {h.status:>9}: {h.name} — {h.reason}")
        return out

    def to_dict(self) -> dict:
        return {"hypotheses": [dataclasses.asdict(h) for h in self.hypotheses]}


def _strides(hits: list[Finding]) -> str:
    """How many layer_offset_mismatch findings one wrong slot count explains, if any."""
    named = [(f.extra.get("stride"), f.extra.get("stride_pool"), f.pool, f.extra.get("pool_slots"))
             for f in hits if f.extra.get("stride") is not None]
    if not named:
        return ""
    top = max(set(named), key=named.count)
    m, m_pool, pool, real = top
    return (f", {named.count(top)} of them explained by pool {m_pool}'s slot count (M={m}) "
            f"applied to pool {pool} (M={real})")


def _scalar(session, sql: str) -> int:
    return int(session.con.sql(sql).fetchall()[0][0] or 0)


def _unknown_because(session) -> str:
    """Why absence of findings proves nothing here ('' when every fact is present)."""
    parts = [u.what for u in getattr(session, "unknowns", [])]
    if not parts:
        return ""
    return "the facts it needs are not all recorded: " + "; ".join(parts[:3]) + (f"; and {len(parts) - 3} more" if len(parts) > 3 else "")


def _unattributed(hits: list[Finding]) -> str:
    n = sum(f.count for f in hits)
    return (f"its only {len(hits)} finding(s) ({n} instance(s)) are on transfers that carry no request, "
            "so which request's data they touch is unknown — record the request with each post (notification tag or hooks: see docs/hooks.md)")


def verdict(session, findings: list[Finding]) -> Verdict:
    """Decide each hypothesis from ``findings`` and the amount of evidence in ``session``."""
    skipped = dict(session.checks_skipped)
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check, []).append(f)
    folded: dict[str, set[str]] = {}   # consequence check -> root-cause checks that explain it
    for f in findings:
        for g in f.extra.get("folded") or []:
            folded.setdefault(g["check"], set()).add(f.check)
    session.derive()
    n_xfers = _scalar(session, "SELECT count(*) FROM xfers")
    n_prepped = _scalar(session, "SELECT count(DISTINCT (shard, xfer)) FROM descs WHERE dst_idx IS NOT NULL OR src_idx IS NOT NULL")
    n_reads = _scalar(session, "SELECT count(*) FROM events WHERE kind = 'read'")
    # a uniform slot count can only misaddress a prepped list whose regions differ in slot count
    multi = _scalar(session, "SELECT count(*) FROM (SELECT shard, dlist FROM dl_region GROUP BY ALL "
                             "HAVING count(DISTINCT num_slots) > 1)")
    out = []
    gap = _unknown_because(session)
    for name, checks in HYPOTHESES.items():
        all_hits = [f for c in checks for f in by_check.get(c, [])]
        hits = [f for f in all_hits if f.request is not None]
        ran = [c for c in checks if c in catalog() and c not in skipped]
        if all_hits and not hits:
            out.append(Hypothesis(name, "untestable", _unattributed(all_hits), len(all_hits)))
            continue
        if hits:
            # the example: the first finding that names its cause (a stride), else the first
            first = next((f for f in hits if f.extra.get("stride") is not None), hits[0])
            reqs = len({f.request for f in hits})
            reason = f"{len(hits)} finding(s) over {reqs} request(s) ({', '.join(sorted({f.check for f in hits}))}){_strides(hits)}; e.g. {first.message}"
            out.append(Hypothesis(name, "supported", reason, len(hits)))
            continue
        explained = sorted({f"{c} (explained by {', '.join(sorted(folded[c]))})" for c in checks if c in folded})
        tail = f"; its only hits are consequences of another cause: {', '.join(explained)}" if explained else ""
        if not ran:
            out.append(Hypothesis(name, "untestable", skipped[checks[0]]))
            continue
        if gap:
            out.append(Hypothesis(name, "untestable", f"no violation found, but {gap}{tail}"))
            continue
        if name == "uniform slot count":
            if n_prepped == 0:
                out.append(Hypothesis(name, "untestable", "no prepped (indexed) transfers in the trace"))
            elif not multi:
                out.append(Hypothesis(name, "untestable", f"{n_prepped} prepped transfers, but the regions of every prepped list have the same slot count, so a uniform count cannot misaddress them"))
            else:
                out.append(Hypothesis(name, "ruled out", f"zero layer_offset_mismatch across {n_prepped} prepped transfers over lists whose regions differ in slot count{tail}"))
        elif name == "slot reuse before read":
            out.append(Hypothesis(name, "ruled out", f"zero findings of {', '.join(ran)} across {n_xfers} transfers{tail}"))
        else:
            if n_reads == 0:
                out.append(Hypothesis(name, "untestable", "the trace has no read events"))
            else:
                bytes_ = ("and matches its predicted checksum" if "checksum_mismatch" in ran else
                          "(the bytes were not compared: the trace has no checksums)")
                what = ("no read precedes its data's completion observation" if tail else
                        f"every one of {n_reads} reads happens after a completion observation {bytes_}")
                out.append(Hypothesis(name, "ruled out", f"{what} ({', '.join(ran)}){tail}"))
    return Verdict(out)
