"""`kvtrace report`: one self-contained HTML file (plots embedded as base64 PNG).

Sections: the verdict, a summary, slot occupancy over time per agent and pool, transfer
latency and size distributions, throughput, and the findings (timeline plot + table).
Data comes from a :class:`TraceSession`; the page layout is ``report.html`` beside
this module (a ``string.Template``).
"""
from __future__ import annotations

import html
import os
import string
from importlib import resources

from . import report_plots as plots
from .export_findings import findings_and_verdict
from .export_occupancy import occupancy_series
from .export_sql import load_sql

#: findings listed in the table (errors come first); the rest are counted
MAX_ROWS = 500


def _row(cells, cls: str = "") -> str:
    tds = "".join(f'<td class="num">{c}</td>' if isinstance(c, (int, float)) and not isinstance(c, bool)
                  else f"<td>{html.escape(str(c))}</td>"
                  for c in cells)
    return f'<tr class="{html.escape(cls)}">{tds}</tr>' if cls else f"<tr>{tds}</tr>"


def _kv_rows(pairs) -> str:
    return "\n".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in pairs)


def _pct(values: list, q: float):
    if not values:
        return "-"
    v = sorted(values)
    return round(v[min(len(v) - 1, int(q * len(v)))], 1)


def verdict_class(verdict: str, findings: list) -> str:
    """CSS class of the verdict banner: bad with any finding, clean, else unknown."""
    if findings:
        return "bad"
    return "unknown" if verdict in ("checks unavailable", "not checked", "unknown") else "clean"


def report_data(session, with_findings: bool = True) -> dict:
    """Everything the report shows, as plain Python data."""
    t0 = session.execute("SELECT min(t_ns) FROM events").fetchall()[0][0] or 0
    occ = {k: [((t - t0) / 1e9, v) for t, v in pts] for k, pts in occupancy_series(session).items()}
    cap = {(a, p): n for a, p, n in session.execute(
        "SELECT agent, pool, max(num_slots) FROM layouts GROUP BY 1, 2").fetchall()}
    xf = session.query(load_sql("export_xfers")).to_pydict()
    lat, sizes, done = [], [], {}
    for i in range(len(xf["xfer"])):
        sizes.append(int(xf["nbytes"][i] or 0))
        if xf["end_kind"][i] == "xfer_done" and xf["t_end"][i] is not None:
            lat.append((xf["t_end"][i] - xf["t_post"][i]) / 1e3)
            done.setdefault(xf["agent"][i], []).append(((xf["t_end"][i] - t0) / 1e9, int(xf["nbytes"][i] or 0)))
    t_max = (session.execute("SELECT max(t_ns) FROM events").fetchall()[0][0] or t0) - t0
    bin_s = max(t_max / 1e9 / 50, 1e-6)
    thr = {}
    for agent, pts in done.items():
        bins: dict = {}
        for t, nb in pts:
            k = int(t / bin_s)
            bins[k] = bins.get(k, 0) + nb
        thr[agent] = [(k * bin_s, bins.get(k, 0)) for k in range(0, max(bins) + 1)]
    findings, verdict = findings_and_verdict(session) if with_findings else ([], "not checked")
    answers = _answers(session) if with_findings else {}
    keys = {tuple(e) for f in findings for e in f["events"]}
    times = {}
    if keys:
        for sh, sq, t in session.execute("SELECT shard, seq, t_ns FROM events").fetchall():
            if (sh, sq) in keys:
                times[(sh, sq)] = (t - t0) / 1e9
    frows = [(min((times[e] for e in f["events"] if e in times), default=t_max / 1e9), f["check"],
              f["severity"], f["count"]) for f in findings]
    counts = dict(session.execute("SELECT kind, count(*) FROM events GROUP BY 1").fetchall())
    summary = [
        ("trace", session.path),
        ("shards", ", ".join(s.name for s in session.trace.shards)),
        ("agents", ", ".join(r[0] for r in session.execute(
            "SELECT DISTINCT agent FROM events WHERE agent IS NOT NULL ORDER BY 1").fetchall())),
        ("events", sum(counts.values())),
        ("duration", f"{t_max / 1e9:.3f} s"),
        ("requests started / done / aborted",
         f"{counts.get('req_start', 0)} / {counts.get('req_done', 0)} / {counts.get('req_abort', 0)} (per side)"),
        ("transfers posted / done / error", f"{counts.get('xfer_post', 0)} / {counts.get('xfer_done', 0)} / "
                                            f"{counts.get('xfer_error', 0)}"),
        ("bytes posted", f"{sum(sizes):,}"),
        ("workload", session.trace.manifest.get("workload", "-")),
    ]
    return {"occupancy": occ, "capacity": cap, "latency_us": lat, "sizes": sizes, "throughput": thr,
            "bin_s": bin_s, "findings": findings, "finding_times": frows, "verdict": verdict,
            "summary": summary, "notes": list(session.notes), "answers": answers}


def _answers(session) -> dict:
    """title -> text lines of the answers beside the findings: who wrote the bytes of
    each corrupted read (grouped), and the further sections of analysis.answers."""
    from .answers import sections
    from .attribution import attribute, summary

    out = {}
    who = attribute(session)
    if who:
        out[f"Who wrote these bytes ({len(who)} corrupted read(s))"] = [
            f"{n} × {line}" for n, line in summary(who, limit=50)]
    for title, _value, lines in sections(session).values():
        if lines:
            out[title] = lines
    return out


def _answers_html(answers: dict) -> str:
    return "".join(f'<h2>{html.escape(t)}</h2><ul class="answers">'
                   + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"
                   for t, lines in answers.items())


def render_report(data: dict, title: str, trace_arg: str) -> str:
    """The report's HTML text from :func:`report_data`'s result."""
    tmpl = string.Template(resources.files("kvtrace.analysis").joinpath("report.html").read_text())
    lat = data["latency_us"]
    stats = [("completed transfers", len(lat)), ("latency p50 / p90 / p99 / max (µs)",
              f"{_pct(lat, .5)} / {_pct(lat, .9)} / {_pct(lat, .99)} / {round(max(lat), 1) if lat else '-'}"),
             ("size min / median / max (bytes)", f"{min(data['sizes'], default='-')} / {_pct(data['sizes'], .5)} / "
                                                 f"{max(data['sizes'], default='-')}")]
    rows = []
    for f in data["findings"][:MAX_ROWS]:
        evs = " ".join(f"{s}:{q}" for s, q in f["events"][:8])  # escaped with the other cells by _row + (" …" if len(f["events"]) > 8 else "")
        rows.append(_row([f["severity"] or "", f["check"] or "", f["agent"] or "", f["request"] or "",
                          f["pool"] or "", "" if f["layer"] is None else f["layer"],
                          "" if f["slot"] is None else f["slot"], f["count"] or 1, f["message"] or "", evs],
                         f["severity"] or ""))
    if len(data["findings"]) > MAX_ROWS:   # the page stays light; `kvtrace check` lists them all
        rows.append(f'<tr><td colspan="10">… {len(data["findings"]) - MAX_ROWS} more findings: '
                    f'run <code>kvtrace check {html.escape(trace_arg)}</code></td></tr>')
    headline, *details = data["verdict"].splitlines() or [""]
    notes = "".join(f'<p class="notes">note: {html.escape(n)}</p>' for n in data["notes"])
    return tmpl.substitute(
        title=html.escape(title), subtitle=html.escape(f"{len(data['findings'])} finding(s)"),
        verdict=html.escape(headline if headline.lower().startswith("verdict") else "Verdict: " + headline),
        verdict_details="".join(f"<li>{html.escape(x)}</li>" for x in details), verdict_class=verdict_class(data["verdict"], data["findings"]),
        notes=notes, summary=_kv_rows(data["summary"]), transfer_stats=_kv_rows(stats),
        occupancy_png=plots.occupancy_png(data["occupancy"], data["capacity"]),
        distributions_png=plots.distributions_png(lat, data["sizes"]),
        throughput_png=plots.throughput_png(data["throughput"], data["bin_s"]),
        findings_png=plots.findings_timeline_png(data["finding_times"]),
        n_findings=len(data["findings"]),
        findings_rows="\n".join(rows) or '<tr><td colspan="10">no findings</td></tr>',
        answers=_answers_html(data.get("answers") or {}), trace_arg=html.escape(trace_arg))


def write_report(session, out: str, trace_arg: str | None = None, with_findings: bool = True) -> dict:
    """Write the report of ``session`` to ``out``; returns the data it shows."""
    data = report_data(session, with_findings)
    title = os.path.basename(session.path.rstrip("/"))
    text = render_report(data, title, trace_arg or session.path)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return data
