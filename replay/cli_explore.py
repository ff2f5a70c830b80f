"""Replay many seeds of one scheduler (symbolic executor) and summarize the failures.

Prints the failing seeds, the failure rate, the first failing schedule string and the
one-line command that replays it.

--what-if NAME[:ARGS] explores the same seeds against the program re-derived under a
proposed fix too ("no failing schedule in 500 seeds under the fix; 137 without it").

exit status: 0 no seed corrupted a read (with --what-if: under the fix); 1 some seed
did (use it to gate CI); 2 bad input.
"""
from __future__ import annotations

import shlex


def add_arguments(p) -> None:
    from .schedulers import NAMES

    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--scheduler", default="pct", choices=NAMES,
                   help="strategy to explore (default: pct)")
    p.add_argument("--seeds", default="0:100", help="seed range START:STOP, half-open (default 0:100)")
    p.add_argument("--depth", type=int, default=3, help="PCT depth d (default 3)")
    p.add_argument("--stop-on-first", action="store_true", help="stop at the first failing seed")
    p.add_argument("--fault", choices=("notify-before-data",), help="inject a transport fault (NIXL #252)")
    p.add_argument("--chunks", type=int, default=1, help="split each transfer into up to N moves (default 1)")
    p.add_argument("--what-if", metavar="NAME[:ARGS]", dest="what_if",
                   help="explore the program under a proposed fix too: per-pool-slot-count, free-after-done, "
                        "status-after-data, or MODULE:FUNCTION (docs/what-if.md)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .exploration import explore, parse_seeds
    from .graph import load

    seeds = parse_seeds(args.seeds)
    g = load(args.trace, args.chunks, args.fault)
    if args.what_if:
        return _what_if(args, g, seeds)
    con = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("failing {task.fields[failing]}"), TimeRemainingColumn(),
                  console=con, disable=args.no_progress, transient=True) as bar:
        task = bar.add_task(f"{args.scheduler}", total=len(seeds), failing=0)
        ex = explore(g, args.scheduler, seeds, args.depth, args.stop_on_first, args.chunks, args.fault,
                     lambda n, f: bar.update(task, completed=n, failing=f))
    print(f"explored {ex.runs} schedules of {g.path} with {args.scheduler}"
          f"{' depth ' + str(args.depth) if args.scheduler == 'pct' else ''}: "
          f"{len(ex.failing)} failing ({100 * ex.rate:.1f}%), {ex.distinct_failures} distinct failure(s)")
    if args.scheduler == "conflicts":
        from .conflicts import conflict_index
        n = len(conflict_index(g).pairs)
        print(f"conflict pairs: {n} (seeds 0..{max(n - 1, 0)} flip each once; larger seeds flip 2-3 at random)")
    if not ex.failing:
        return 0
    from .api import make_executor, make_scheduler, run_graph
    if run_graph(g, make_scheduler("eager"), make_executor(), compare_recorded=False).verdict.failed:
        print("note: the eager schedule (every transfer's data at its post) fails too — this corruption "
              "needs no reordering (a deterministic bug, or the recording's own order)")
    shown = ", ".join(map(str, ex.failing[:20])) + (" ..." if len(ex.failing) > 20 else "")
    print(f"failing seeds: {shown}")
    print(f"first failing seed {ex.failing[0]}:")
    for line in ex.first_lines:
        print("  " + line)
    print(f"schedule: {ex.first_schedule}")
    print("replay it: kvtrace replay " + shlex.quote(args.trace) + f" --schedule {ex.first_schedule} -o replay.kvtrace")
    print("shrink it: kvtrace minimize " + shlex.quote(args.trace) + f" --schedule {ex.first_schedule}")
    return 1


def _what_if(args, g, seeds) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .whatif.run import explore_whatif

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("failing {task.fields[before]} / under the fix {task.fields[after]}"),
                  console=Console(stderr=True), disable=args.no_progress, transient=True) as bar:
        task = bar.add_task(args.scheduler, total=2 * len(seeds), before=0, after=0)
        w = explore_whatif(g, args.what_if, args.scheduler, seeds, args.depth, args.chunks, args.fault,
                           lambda n, total, b, a: bar.update(task, completed=n, before=b, after=a))
    label = w.fix.whatif.label
    print(f"explored {len(seeds)} schedules of {g.path} with {args.scheduler}, with and without what-if {label}:")
    for line in w.fix.lines:
        print("  " + line)
    nb, na = len(w.before.failing), len(w.after.failing)
    if na:
        print(f"{na} failing schedule(s) in {len(seeds)} seeds under the fix; {nb} without it")
        print(f"first failing seed under the fix {w.after.failing[0]}:")
        for line in w.after.first_lines:
            print("  " + line)
        print(f"schedule: {w.after.first_schedule}")
        print("replay it: kvtrace replay " + shlex.quote(args.trace) + f" --what-if {shlex.quote(label)} "
              f"--scheduler {args.scheduler} --seed {w.after.failing[0]}")
        return 1
    print(f"no failing schedule in {len(seeds)} seeds under the fix; {nb} without it")
    return 0
