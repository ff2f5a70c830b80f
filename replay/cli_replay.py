"""Re-execute a trace's transfers under a seeded schedule and verify every read.

Program events keep their recorded order per thread and their recorded slots; each
transfer's bytes move at a point the scheduler picks between its post and its first
completion observation. The executed schedule prints as a string; --schedule STRING
replays it exactly.

schedulers: recorded (post + measured duration), eager (at post), lazy (latest legal
point), random (--seed), pct (--seed, --depth), conflicts (--seed indexes the slot
conflict flipped).

exit status: 0 every read verified clean; 1 corruption found (a read saw the wrong
bytes, a descriptor fell outside memory, or — in a trace without reads — a transfer
did not deliver its source as it was at post); 2 bad input.
"""
from __future__ import annotations

SCHEDULERS = ("recorded", "eager", "lazy", "random", "pct", "conflicts")


def add_arguments(p) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--scheduler", default="recorded", choices=SCHEDULERS, help="strategy (default: recorded)")
    p.add_argument("--seed", type=int, default=0, help="seed of random/pct/conflicts (default 0)")
    p.add_argument("--depth", type=int, default=3, help="PCT depth d (default 3)")
    p.add_argument("--executor", default="symbolic", choices=("symbolic", "bytes", "nixl"),
                   help="symbolic: provenance tags (fast); bytes: re-created memory; nixl: bytes moved by real NIXL agents")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="byte executor memory and kernels")
    p.add_argument("--schedule", metavar="STRING", help="replay this exact schedule (kvs1:...)")
    p.add_argument("--fault", choices=("notify-before-data",), help="inject a transport fault (NIXL #252)")
    p.add_argument("--chunks", type=int, default=1, help="split each transfer into up to N moves (default 1)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the replay as a trace here")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from .api import replay
    from .schedule import ScheduleError

    if args.chunks < 1:
        raise UsageError("--chunks must be at least 1")
    if args.executor != "bytes" and args.device == "cuda":
        raise UsageError("--device cuda applies to --executor bytes")
    try:
        o = replay(args.trace, args.scheduler, args.seed, args.depth, args.executor, args.device,
                   args.schedule, args.fault, args.chunks, args.output)
    except ScheduleError as e:
        raise UsageError(str(e)) from None
    except RuntimeError as e:  # missing optional capability (CUDA, nixl)
        raise UsageError(str(e)) from None
    g, v = o.graph, o.verdict
    who = "schedule" if args.schedule else f"{args.scheduler} seed {args.seed}"
    print(f"replayed {g.path}: {g.n_prog} events, {len(g.transfers)} transfers, {len(g.move_xfer)} moves "
          f"({who}, {args.executor} executor{', fault ' + args.fault if args.fault else ''})")
    for n in g.notes[:5]:
        print("note:", n)
    for line in v.lines(g):
        print(line)
    print(f"verdict: {'CORRUPTED' if v.failed else 'clean'}")
    print(f"schedule: {o.schedule}")
    if args.output:
        print(f"wrote {args.output}")
    return 1 if v.failed else 0
