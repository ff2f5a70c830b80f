"""The sweep's figure (corrupted-request rate and findings against concurrency, one
line per configuration) and its self-contained ``sweep.html``."""
from __future__ import annotations

import base64
import html
import os

from .report_plots import _plt


def sweep_figure(points: list, path: str) -> bytes:
    """Draw the sweep figure to ``path`` (PNG) and return its bytes."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    configs = list(dict.fromkeys(p.config for p in points))
    for cfg in configs:
        pts = sorted((p for p in points if p.config == cfg), key=lambda p: p.concurrency)
        xs = [p.concurrency for p in pts]
        a.plot(xs, [100 * p.rate for p in pts], marker="o", label=cfg)
        b.plot(xs, [sum(p.findings.values()) for p in pts], marker="s", label=cfg)
        for p in pts:
            if p.requests:
                a.annotate(f"{p.corrupted}/{p.requests}", (p.concurrency, 100 * p.rate), fontsize=7,
                           textcoords="offset points", xytext=(0, 5), ha="center")
    a.set_xlabel("concurrency")
    a.set_ylabel("corrupted requests (%)")
    a.set_title("corrupted-request rate", fontsize=10)
    b.set_xlabel("concurrency")
    b.set_ylabel("findings (root causes)")
    b.set_title("findings per point", fontsize=10)
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.set_xticks(sorted({p.concurrency for p in points}))
        ax.legend(fontsize=8)
    # fixed floors so an all-zero sweep reads as "zero", not as noise around zero
    a.set_ylim(0, max([5.0] + [120 * p.rate for p in points]))
    b.set_ylim(0, max([3] + [1.2 * sum(p.findings.values()) for p in points]))
    b.yaxis.get_major_locator().set_params(integer=True)
    fig.savefig(path, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    with open(path, "rb") as f:
        return f.read()


def sweep_html(points: list, png: bytes, meta: dict) -> str:
    """``sweep.html``: the figure embedded, and a table of every point's numbers."""
    checks = sorted({c for p in points for c in p.findings})
    head = ["configuration", "concurrency", "requests", "corrupted", "rate", "source"] + checks + ["verdict", "trace"]
    rows = []
    for p in points:
        cells = [p.config, p.concurrency, p.requests, p.corrupted, f"{100 * p.rate:.1f}%", p.source]
        cells += [f"{p.findings.get(c, 0)} ({p.affected.get(c, 0)})" for c in checks] + [p.verdict, p.trace]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    title = html.escape(f"kvtrace sweep: workload {meta.get('workload')}, inject {meta.get('inject') or 'none'}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1200px;margin:1.5em auto}}
table{{border-collapse:collapse;font-size:.85em}}td,th{{border:1px solid #ddd;padding:3px 6px}}
th{{background:#f6f6f6}}img{{max-width:100%}}</style></head><body>
<h1>{title}</h1>
<p>{html.escape(meta.get('command', ''))}</p>
<img id="sweep-plot" alt="corrupted-request rate and findings against concurrency"
 src="data:image/png;base64,{base64.b64encode(png).decode()}">
<p>Findings cells: number of findings (summed affected count).</p>
<table id="points"><thead><tr>{''.join(f'<th>{html.escape(h)}</th>' for h in head)}</tr></thead>
<tbody>{''.join(rows)}</tbody></table>
</body></html>
"""


def write_sweep_outputs(out_dir: str, points: list, meta: dict) -> tuple[str, str]:
    """Write ``sweep.png`` and ``sweep.html``; returns their paths."""
    png_path = os.path.join(out_dir, "sweep.png")
    png = sweep_figure(points, png_path)
    html_path = os.path.join(out_dir, "sweep.html")
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(sweep_html(points, png, meta))
    return png_path, html_path
