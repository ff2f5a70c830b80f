"""Matplotlib figures of the HTML report, each returned as base64 PNG (Agg backend,
no display). Every function takes plain data so it can be tested without a trace."""
from __future__ import annotations

import base64
import io
import warnings

_SEV_COLOR = {"error": "#c0392b", "warning": "#e67e22"}


def _plt():
    import matplotlib  # ~0.4 s import; only the report and sweep need it

    matplotlib.use("Agg", force=True)
    # agent and pool names come from the trace: plain text, never mathtext ("$...$")
    matplotlib.rcParams["text.parse_math"] = False
    # ... and may hold characters the font lacks (an emoji, a tab): drawn as a box, without
    # matplotlib's warning, which names only its own file and line
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
    import matplotlib.pyplot as plt
    return plt


def png(fig) -> str:
    """Encode a figure as base64 PNG and close it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def occupancy_png(series: dict, capacity: dict) -> str:
    """Slots occupied over time: a grid of small panels, one row per agent and one
    column per pool (pools of one agent often share a token budget, so overlaid lines
    would hide each other).

    Args:
        series: ``{(agent, pool): [(seconds, occupied), ...]}``.
        capacity: ``{(agent, pool): num_slots}`` drawn as a dashed limit.
    """
    plt = _plt()
    agents = sorted({a for a, _ in series})
    pools = sorted({p for _, p in series})
    if not agents:
        fig, ax = plt.subplots(figsize=(9, 1.6))
        ax.text(0.5, 0.5, "no alloc/free events (no allocator hooks)", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return png(fig)
    fig, axes = plt.subplots(len(agents), len(pools), figsize=(min(16, 3.2 * len(pools) + 1), 2.2 * len(agents)),
                             squeeze=False, sharex=True)
    for r, agent in enumerate(agents):
        for c, pool in enumerate(pools):
            ax = axes[r, c]
            pts = series.get((agent, pool))
            if pts:
                xs, ys = zip(*pts)
                # start from empty at the first event so the first allocation shows as a rise
                ax.step((xs[0],) + xs, (0,) + ys, where="post", color="#2c7fb8")
                cap = capacity.get((agent, pool))
                if cap:
                    ax.axhline(cap, ls="--", lw=0.8, color="#888")
                ax.set_ylim(bottom=0)
            else:
                ax.text(0.5, 0.5, "no slots", ha="center", va="center", transform=ax.transAxes, fontsize=8)
            ax.set_title(f"{agent} · {pool}", fontsize=9)
            ax.tick_params(labelsize=7)
            if c == 0:
                ax.set_ylabel("slots occupied", fontsize=8)
            if r == len(agents) - 1:
                ax.set_xlabel("time (s)", fontsize=8)
    fig.suptitle("dashed: pool size (slots per layer)", fontsize=8, y=1.0)
    fig.tight_layout()
    return png(fig)


def distributions_png(latency_us: list, sizes: list) -> str:
    """Histograms of transfer latency (post → completion) and size, in readable units."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 2.8))
    lat_ms = max(latency_us, default=0) > 10_000
    lat = [x / 1e3 for x in latency_us] if lat_ms else latency_us
    kib = max(sizes, default=0) > 8192
    size = [x / 1024 for x in sizes] if kib else sizes
    for ax, data, label in ((a, lat, f"latency post → completion ({'ms' if lat_ms else 'µs'})"),
                            (b, size, f"size per transfer ({'KiB' if kib else 'bytes'})")):
        if data:
            ax.hist(data, bins=min(40, max(5, len(set(data)))), color="#2c7fb8")
        else:
            ax.text(0.5, 0.5, "no transfers", ha="center", transform=ax.transAxes)
        ax.set_xlabel(label)
        ax.set_ylabel("transfers")
    fig.tight_layout()
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
