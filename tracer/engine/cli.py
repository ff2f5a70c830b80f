"""``kvtrace record`` (engine mode): run the reference PD engine and record it.

Prints a progress bar while it runs and the engine verifier's summary at the end:
pages read, corrupted pages, corrupted requests and whose bytes the bad pages hold.
The summary also goes into ``manifest.json`` under ``engine``.
"""
from __future__ import annotations

import os
import shutil
import sys


def _user_error(msg: str) -> Exception:
    from kvtrace.errors import UsageError
    return UsageError(msg)


def run_engine(args) -> int:
    """Entry point called by tracer/cli_record.py; returns the exit status."""
    from .workload import BUGS, WorkloadError, load
    bad = [b for b in args.inject if b not in BUGS]
    if bad:
        raise _user_error(f"--inject {bad[0]}: unknown bug (choose from {', '.join(BUGS)})")
    if args.concurrency is not None and args.concurrency < 1:
        raise _user_error("--concurrency must be >= 1")
    try:
        wl = load(args.workload, concurrency=args.concurrency, index_k=args.index_k, seed=args.seed)
    except WorkloadError as e:
        raise _user_error(str(e)) from None
    after = getattr(args, "inject_after", 0) or 0
    if after < 0:
        raise _user_error("--inject-after must be >= 0")
    if after and "uniform-slot-count" in args.inject:
        raise _user_error("--inject-after: uniform-slot-count is fixed when the agents register; it cannot start late")
    if after:
        wl.engine["inject_after"] = after
    ring = getattr(args, "ring", None)
    from .geometry import impossible_bugs
    cannot = impossible_bugs(wl)
    for bug in args.inject:
        if bug in cannot:
            print(f"kvtrace record: warning: --inject {bug} cannot corrupt anything in workload {wl.name} "
                  f"with index_k {wl.index_k}: {cannot[bug]}", file=sys.stderr)
    out = args.output
    if os.path.exists(out):
        if not args.force:
            raise _user_error(f"{out} exists (use --force to overwrite)")
        shutil.rmtree(out)
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise _user_error("--device cuda: no CUDA device available")
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    summary = record(wl, args.inject, out, processes=args.processes, device=args.device,
                     progress=not args.no_progress, command="kvtrace " + " ".join(sys.argv[1:]),
                     checksums=not args.no_checksums, ring=ring)
    print_summary(summary, out)
    if ring:
        dumps = summary.get("ring_dumps") or []
        print(f"ring {ring}: {len(dumps)} dump(s)" + "".join(f"\n  {d}" for d in dumps))
    return 0


def record(wl, bugs, out: str, *, processes: int = 1, device: str = "cpu", progress: bool = False,
           command: str = "engine", checksums: bool = True, ring: str | None = None) -> dict:
    """Run the engine on ``wl`` with ``bugs`` and record the trace ``out``; the summary."""
    from .. import manifest
    from .runner import run_inprocess, run_two_processes
    manifest.update(out, tool="kvtrace record", command=command, workload=wl.name, workload_config=wl.to_dict(),
                    inject=list(bugs), processes=processes, device=device, checksums=checksums,
                    **({"ring": ring, "inject_after": wl.engine.get("inject_after", 0)} if ring else {}))
    run = run_two_processes if processes == 2 else run_inprocess
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        cols = (TextColumn("[bold]recording[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("requests"), TimeElapsedColumn())
        with Progress(*cols, transient=True) as bar:
            task = bar.add_task(f"{wl.name} c={wl.concurrency} index_k={wl.index_k}", total=None)

            def on_step(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)
            summary = run(wl, bugs, out, device, on_step, checksums=checksums, ring=ring)
    else:
        summary = run(wl, bugs, out, device, checksums=checksums, ring=ring)
    if ring:
        summary["ring_dumps"] = manifest.read(out).get("dumps", [])
    manifest.finish(out, engine=summary)
    return summary


def print_summary(s: dict, out: str) -> None:
    """The verifier's verdict, a few lines a serving engineer reads at a glance."""
    from rich.console import Console
    c = Console()
    rate = s["corrupted_pages"] / s["pages_read"] if s["pages_read"] else 0.0
    c.print(f"[bold]{out}[/]: {s['requests']} requests in {s['steps']} steps, {s['seconds']:.1f} s "
            f"(done {s['done']}, aborted {s['aborted']}, timed out {s['timed_out']}, failed {s['failed']})")
    style = "green" if not s["corrupted_pages"] else "red"
    c.print(f"verifier: {s['pages_read']} pages read, [{style}]{s['corrupted_pages']} corrupted[/] "
            f"({rate:.2%}) in [{style}]{s['corrupted_requests']}[/] of {s['requests_read']} requests read")
    if s["corrupted_pages"]:
        pools = ", ".join(f"{p} {n}" for p, n in sorted(s["corrupted_by_pool"].items()))
        c.print(f"  by pool: {pools}")
        for what, n in sorted(s["attribution"].items(), key=lambda kv: -kv[1]):
            c.print(f"  {n:6d} pages hold {what}")
        for e in s["examples"][:3]:
            c.print(f"  e.g. request {e['request']} {e['pool']} layer {e['layer']} page {e['page']} "
                    f"(slot {e['slot']}) holds {e['holds']}")
