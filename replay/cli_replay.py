"""Re-execute a trace's transfers under a seeded schedule and verify every read.

Program events keep their recorded order per thread and their recorded slots (and,
across the threads of one process, wherever two touch the same slot: a write, a read,
or the post of a transfer reading or filling it); each transfer's bytes move at a point
the scheduler picks between its post and its first completion observation. The executed schedule prints as a string; --schedule STRING
replays it exactly.

schedulers: recorded (post + measured duration), eager (at post), lazy (latest legal
point), random (--seed), pct (--seed, --depth), conflicts (--seed indexes the slot
conflict flipped).

--what-if NAME[:ARGS] re-derives the recorded program under a proposed fix and replays
it under the same scheduler and seed (a --schedule string: in the same order as far as
the fix allows): corruption before and after, and what the fix changed. Built in:
per-pool-slot-count, free-after-done[:pools=P,..], status-after-data; your own as
MODULE:FUNCTION or FILE.py:FUNCTION (docs/what-if.md).

exit status: 0 every read verified clean (with --what-if: under the fix); 1 corruption found (a read saw the wrong bytes, a descriptor fell outside memory, or — in a trace
without reads — a transfer did not deliver its source as it was at post); 2 bad input.
"""
from __future__ import annotations

def add_arguments(p) -> None:
    from .schedulers import NAMES

    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--scheduler", default="recorded", choices=NAMES, help="strategy (default: recorded)")
    p.add_argument("--seed", type=int, default=0, help="seed of random/pct/conflicts (default 0)")
    p.add_argument("--depth", type=int, default=3, help="PCT depth d (default 3)")
    p.add_argument("--executor", default="symbolic", choices=("symbolic", "bytes", "nixl"),
                   help="symbolic: provenance tags (fast); bytes: re-created memory; nixl: bytes moved by real NIXL agents")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="byte executor memory and kernels")
    p.add_argument("--schedule", metavar="STRING", help="replay this exact schedule (kvs1:...)")
    p.add_argument("--fault", choices=("notify-before-data",), help="inject a transport fault (NIXL #252)")
    p.add_argument("--chunks", type=int, default=1, help="split each transfer into up to N moves (default 1)")
    p.add_argument("--what-if", metavar="NAME[:ARGS]", dest="what_if",
                   help="replay under a proposed fix too: per-pool-slot-count, free-after-done, "
                        "status-after-data, or MODULE:FUNCTION (docs/what-if.md)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the replay (with --what-if: under the fix) as a trace here")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from .api import replay

    if args.chunks < 1:
        raise UsageError("--chunks must be at least 1")
    if args.executor != "bytes" and args.device == "cuda":
        raise UsageError("--device cuda applies to --executor bytes")
    if args.what_if:
        return _what_if(args)
    # a bad schedule string, a missing capability (CUDA, nixl): kvtrace.errors, one line
    o = replay(args.trace, args.scheduler, args.seed, args.depth, args.executor, args.device,
               args.schedule, args.fault, args.chunks, args.output)
    g, v = o.graph, o.verdict
    who = "schedule" if args.schedule else f"{args.scheduler} seed {args.seed}"
    print(f"replayed {g.path}: {g.n_prog} events, {len(g.transfers)} transfers, {len(g.move_xfer)} moves "
          f"({who}, {args.executor} executor{', fault ' + args.fault if args.fault else ''})")
    for n in g.notes[:5]:
        print("note:", n)
    for line in v.lines(g):
        print(line)
    print(f"verdict: {_word(v)}")
    print(f"schedule: {o.schedule}")
    if args.output:
        print(f"wrote {args.output}")
    return 1 if v.failed else 0


def _word(v) -> str:
    """The verdict in a word or three: CORRUPTED, clean, or clean only as far as a partial trace decides."""
    if v.failed:
        return "CORRUPTED"
    return f"clean where decidable ({v.undecidable} slot-read(s) not decidable: partial trace)" if v.undecidable \
        else "clean"


def _what_if(args) -> int:
    from .whatif.run import replay_whatif

    w = replay_whatif(args.trace, args.what_if, args.scheduler, args.seed, args.depth, args.executor,
                      args.device, args.schedule, args.fault, args.chunks,
                      observe_writes=bool(args.output))
    g, before, after = w.before.graph, w.before.verdict, w.after.verdict
    who = "schedule" if args.schedule else f"{args.scheduler} seed {args.seed}"
    print(f"replayed {g.path}: {g.n_prog} events, {len(g.transfers)} transfers, {len(g.move_xfer)} moves "
          f"({who}, {args.executor} executor{', fault ' + args.fault if args.fault else ''})")
    for n in g.notes[:5]:
        print("note:", n)
    print(f"what-if {w.fix.whatif.label}:")
    for line in w.fix.lines:
        print("  " + line)
    print("before (the recorded program):")
    for line in before.lines(g):
        print("  " + line)
    print(f"  verdict: {_word(before)}")
    how = "the same order where the fix allows" if args.schedule else f"{args.scheduler} seed {args.seed}"
    print(f"after ({w.fix.whatif.label}, {how}):")
    for line in after.lines(w.after.graph):
        print("  " + line)
    if w.forced > 0:
        print(f"  the fix deadlocks: {w.forced} operation(s) waited for something that only came later")
    print(f"  verdict: {_word(after)}")
    print(f"schedule: {w.before.schedule}")
    if args.output:
        from .output import write_trace
        write_trace(args.output, w.after.graph, w.after.result, w.after.executor, after, {
            "scheduler": w.after.scheduler, "seed": w.after.seed, "schedule": w.before.schedule,
            "tool": "kvtrace replay", "replay": {"source": g.path, "what_if": w.fix.whatif.label,
                                                 "executor": args.executor, "fault": args.fault,
                                                 "corrupted": len(after.corrupted), "failed": after.failed}})
        print(f"wrote {args.output}")
    return 1 if after.failed else 0
