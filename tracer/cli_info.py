"""Summarize a trace: shards, events by kind, requests, transfers, bytes, time span,
and what is missing or cut short (truncated streams, unclosed or missing shards)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def summarize(trace) -> dict:
    """The numbers `kvtrace info` prints, as a dict."""
    import pyarrow.compute as pc

    ev = trace.table("events")
    ds = trace.table("descs")
    kinds = ev.column("kind").value_counts().to_pylist() if ev.num_rows else []
    posts = pc.equal(ev.column("kind"), "xfer_post") if ev.num_rows else None
    reqs = pc.unique(pc.drop_null(ev.column("request"))) if ev.num_rows else []
    shards = []
    for s in trace.shards:
        e = s.streams["events"].table
        span = (pc.min(e.column("t_ns")).as_py(), pc.max(e.column("t_ns")).as_py()) if e.num_rows else (None, None)
        shards.append({"name": s.name, "pid": s.info.get("pid"), "host": s.info.get("host"),
                       "closed": s.closed, "events": e.num_rows,
                       "descs": s.streams["descs"].table.num_rows,
                       "span_ms": (span[1] - span[0]) / 1e6 if span[0] is not None else 0.0})
    return {
        "path": trace.path,
        # complete: the launcher finished it AND every listed shard is here, closed, uncut, gapless
        "complete": bool(trace.manifest.get("complete")) and _facts_complete(trace),
        "workload": trace.manifest.get("workload"),
        "shards": shards,
        "events": ev.num_rows,
        "kinds": {k["values"]: k["counts"] for k in sorted(kinds, key=lambda k: -k["counts"])},
        "requests": len(reqs),
        "transfers": int(pc.sum(posts).as_py() or 0) if posts is not None else 0,
        "descriptors": ds.num_rows,
        "bytes": int(pc.sum(ds.column("nbytes")).as_py() or 0) if ds.num_rows else 0,
        "layouts": trace.table("layouts").num_rows,
        "notes": list(trace.notes),
    }


def _facts_complete(trace) -> bool:
    from ..model.cut import is_complete, untraced_postings
    return (is_complete(trace) and not any(untraced_postings(s) for s in trace.shards)
            and not _descs_missing(trace))


def _descs_missing(trace) -> bool:
    """Descriptor rows missing although none were counted lost (model.cut.silent_desc_loss),
    over the tables as read: the analysis cuts such a trace, so it is not complete."""
    import duckdb

    from ..model.cut import silent_desc_loss

    con = duckdb.connect()
    try:
        for name in ("events", "descs", "dlists"):
            con.register(name, trace.table(name))
        return bool(silent_desc_loss(con, trace))
    finally:
        con.close()


def unknowns(path: str) -> list[dict]:
    """What the analysis cannot know in this trace and why (missing shard, cut stream,
    unclosed shard, seq gaps, receives whose send was lost), each with what to record."""
    from ..model import TraceModel

    with TraceModel(path) as m:
        return [{"what": u.what, "count": u.count, "record": u.record} for u in m.unknowns]


def run(args) -> int:
    import json

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from .reader import open_trace

    trace = open_trace(args.trace)
    info = summarize(trace)
    info["unknown"] = [] if info["complete"] or _facts_complete(trace) else unknowns(args.trace)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    con = Console()
    # every name below comes from the trace: escaped, so "[...]" in it prints as itself
    con.print(f"[bold]{escape(info['path'])}[/]  {'complete' if info['complete'] else '[yellow]incomplete[/]'}"
              + (f"  workload={escape(str(info['workload']))}" if info['workload'] else ""), highlight=False)
    t = Table("shard", "pid", "host", "closed", "events", "descs", "span ms", box=None)
    for s in info["shards"]:
        t.add_row(Text(s["name"]), Text(str(s["pid"])), Text(str(s["host"])), "yes" if s["closed"] else "[red]no[/]",
                  f"{s['events']:,}", f"{s['descs']:,}", f"{s['span_ms']:.1f}")
    con.print(t)
    con.print(f"events {info['events']:,}  requests {info['requests']:,}  transfers {info['transfers']:,}  "
              f"descriptors {info['descriptors']:,}  bytes {info['bytes']:,}  layouts {info['layouts']}")
    con.print(Text("kinds: " + "  ".join(f"{k}={v:,}" for k, v in info["kinds"].items())))
    for n in info["notes"]:
        con.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
    for u in info["unknown"]:
        n = f" ({u['count']:,})" if u["count"] else ""
        con.print(f"[yellow]unknown:[/] {escape(u['what'])}{n} — to resolve: {escape(u['record'])}", highlight=False)
    return 0
