"""Matplotlib figures of the HTML report, each returned as base64 PNG (Agg backend,
no display). Every function takes plain data so it can be tested without a trace."""
from __future__ import annotations

import base64
import io

_SEV_COLOR = {"error": "#c0392b", "warning": "#e67e22"}


def _plt():
    import matplotlib  # ~0.4 s import; only the report and sweep need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def png(fig) -> str:
    """Encode a figure as base64 PNG and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def occupancy_png(series: dict, capacity: dict) -> str:
    """Slots occupied over time: one panel per agent, a step line per pool.

    Args:
        series: ``{(agent, pool): [(seconds, occupied), ...]}``.
        capacity: ``{(agent, pool): num_slots}`` drawn as dashed limits.
    """
    plt = _plt()
    agents = sorted({a for a, _ in series}) or ["(no alloc/free events)"]
    fig, axes = plt.subplots(len(agents), 1, figsize=(9, 2.4 * len(agents)), squeeze=False, sharex=True)
    for ax, agent in zip(axes[:, 0], agents):
        for (a, pool), pts in sorted(series.items()):
            if a != agent or not pts:
                continue
            xs, ys = zip(*pts)
            # start from empty at the first event so the first allocation shows as a rise
            line, = ax.step((xs[0],) + xs, (0,) + ys, where="post", label=pool)
            cap = capacity.get((a, pool))
            if cap:
                ax.axhline(cap, ls="--", lw=0.8, color=line.get_color())
        ax.set_title(f"{agent}: slots occupied (dashed: pool size)", fontsize=9)
        ax.set_ylabel("slots")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("time since first event (s)")
    return png(fig)


def distributions_png(latency_us: list, sizes: list) -> str:
    """Histograms of transfer latency (post → completion, µs) and size (bytes)."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 2.8))
    for ax, data, label in ((a, latency_us, "latency post → completion (µs)"), (b, sizes, "bytes per transfer")):
        if data:
            ax.hist(data, bins=min(40, max(5, len(set(data)))), color="#2c7fb8")
        else:
            ax.text(0.5, 0.5, "no completed transfers", ha="center", transform=ax.transAxes)
        ax.set_xlabel(label)
        ax.set_ylabel("transfers")
    return png(fig)


def throughput_png(points: dict, bin_s: float) -> str:
    """Completed transfer bytes per second over time, one line per initiating agent.

    Args:
        points: ``{agent: [(bin start seconds, bytes), ...]}``.
        bin_s: bin width in seconds.
    """
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 2.6))
    for agent, pts in sorted(points.items()):
        if pts:
            xs, ys = zip(*pts)
            ax.step(xs, [y / bin_s / 1e6 for y in ys], where="post", label=agent)
    if not points:
        ax.text(0.5, 0.5, "no completed transfers", ha="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=8)
    ax.set_xlabel("time since first event (s)")
    ax.set_ylabel("MB/s completed")
    return png(fig)


def findings_timeline_png(rows: list) -> str:
    """Findings over time: x = time of the finding's first event, y = check.

    Args:
        rows: ``[(seconds, check, severity, count), ...]``.
    """
    plt = _plt()
    checks = sorted({r[1] for r in rows})
    fig, ax = plt.subplots(figsize=(9, max(1.6, 0.45 * len(checks) + 0.9)))
    for t, check, sev, count in rows:
        ax.scatter([t], [checks.index(check)], s=20 + 8 * min(count or 1, 30),
                   color=_SEV_COLOR.get(sev, "#555"), alpha=0.75)
    ax.set_yticks(range(len(checks)), checks)
    if not rows:
        ax.text(0.5, 0.5, "no findings", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xlabel("time since first event (s); marker size ~ count; red = error, orange = warning")
    return png(fig)
