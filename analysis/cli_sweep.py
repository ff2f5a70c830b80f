"""Record and check a workload across concurrencies, and plot what breaks.

  kvtrace sweep --workload small --concurrency 1,8,16 -o out/sweep
  kvtrace sweep --workload production --concurrency 1,8,16,32,64,80 \\
      --index-k fp8,bf16 --inject uniform-slot-count -o out/sweep

Each point is a `kvtrace record` of the reference engine followed by the checks. Writes
DIR/sweep.json (every number), DIR/sweep.png (corrupted-request rate and findings
against concurrency, one line per configuration) and DIR/sweep.html; the traces stay
in DIR/traces for `kvtrace check` / `report` / `tui`.
"""
from __future__ import annotations

import contextlib
import os


def _ints(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        vals = []
    if not vals or any(v < 1 for v in vals):
        from kvtrace.errors import UsageError
        raise UsageError(f"--concurrency wants positive integers separated by commas, got {text!r}")
    return vals


def validate_inputs(workload: str, inject: list[str]) -> None:
    """Fail fast (one line) on an unknown workload or bug, before any point runs."""
    from kvtrace.errors import UsageError

    try:
        from kvtrace.tracer.engine.workload import BUGS, WorkloadError, load
    except ImportError as e:
        raise UsageError(f"the reference engine is not available in this install ({e})") from None
    bad = [b for b in inject if b not in BUGS]
    if bad:
        raise UsageError(f"--inject {bad[0]}: unknown bug (choose from {', '.join(BUGS)})")
    try:
        load(workload)
    except WorkloadError as e:
        raise UsageError(str(e)) from None


def record_point(out: str, workload: str, concurrency: int, inject: list[str], index_k: str | None,
                 seed: int | None, processes: int, device: str, log_path: str) -> dict:
    """Record one point with the reference engine's Python API (what ``kvtrace record``
    runs); returns the engine verifier's summary."""
    import shutil

    from kvtrace.errors import UsageError
    from kvtrace.tracer.engine.cli import record
    from kvtrace.tracer.engine.workload import WorkloadError, load

    try:
        wl = load(workload, concurrency=concurrency, index_k=index_k, seed=seed)
    except WorkloadError as e:
        raise UsageError(str(e)) from None
    if os.path.exists(out):
        shutil.rmtree(out)
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        return record(wl, list(inject), out, processes=processes, device=device, progress=False)


def add_arguments(p) -> None:
    p.add_argument("-o", "--output", required=True, help="output directory (created)")
    p.add_argument("--workload", default="small", help="engine workload preset name or TOML file")
    p.add_argument("--concurrency", default="1,8,16,32,64,80", help="comma-separated concurrencies")
    p.add_argument("--inject", action="append", default=[], metavar="BUG",
                   help="engine bug injected at every point (repeatable)")
    p.add_argument("--index-k", default=None,
                   help="comma-separated index_k dtypes, one configuration each (fp8,bf16); default: the preset's")
    p.add_argument("--seed", type=int, default=None, help="engine seed (same for every point)")
    p.add_argument("--processes", type=int, choices=(1, 2), default=1, help="engine processes per point")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the engine's KV pools live")
    p.add_argument("--force", action="store_true", help="write into a non-empty output directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    import shlex
    import sys

    from kvtrace.errors import UsageError

    from .export_paths import make_output_dir

    conc = _ints(args.concurrency)
    iks = [x.strip() for x in args.index_k.split(",") if x.strip()] if args.index_k else [None]
    bad = [x for x in iks if x not in (None, "fp8", "bf16")]
    if bad:
        raise UsageError(f"--index-k: unknown dtype {bad[0]!r}; choose fp8 and/or bf16")
    validate_inputs(args.workload, args.inject)
    out = make_output_dir(args.output, args.force)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .report_sweep import write_sweep_outputs
    from .sweep import run_sweep, write_results

    total = len(conc) * len(iks)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=args.no_progress, transient=False) as bar:
        task = bar.add_task("sweep", total=total)

        def progress(advance: int, text: str) -> None:
            bar.update(task, advance=advance, description=text)

        try:
            def record(trace: str, concurrency: int, index_k: str | None, log_path: str) -> dict:
                return record_point(trace, args.workload, concurrency, args.inject, index_k, args.seed,
                                    args.processes, args.device, log_path)

            points = run_sweep(out, record, conc, args.inject, iks, progress)
        except OSError as e:
            raise UsageError(f"{e.filename or out}: cannot write ({e.strerror or e})") from None
    meta = {"workload": args.workload, "concurrency": conc, "inject": args.inject,
            "index_k": [x or "preset" for x in iks], "seed": args.seed,
            "command": "kvtrace " + " ".join(shlex.quote(a) for a in sys.argv[1:])}
    write_results(out, points, meta)
    png, page = write_sweep_outputs(out, points, meta)
    for p in points:
        n = sum(p.findings.values())
        print(f"{p.config:<40} c={p.concurrency:<4} corrupted {p.corrupted}/{p.requests} "
              f"({100 * p.rate:.1f}%) [{p.source}; trace checksums {p.checksum_corrupted}/{p.checksum_requests}] "
              f"findings {n}: " + (", ".join(f"{k} {v}" for k, v in sorted(p.findings.items())) or "none"))
    print(f"wrote {page}, {png} and sweep.json")
    return 0
