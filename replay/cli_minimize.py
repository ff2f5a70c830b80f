"""Shrink a failing schedule to the fewest reorderings that still corrupt a read.

A reordering is "transfer X's bytes moved after event E" where E touches the same slot
and the eager schedule would have moved X first. Prints the minimal schedule string and
the plain list of reorderings; removing any one of them makes the failure disappear.

exit status: 0 minimized (the schedule fails; see the list); 1 the schedule does not
fail; 2 bad input.
"""
from __future__ import annotations

import shlex


def add_arguments(p) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace)")
    p.add_argument("--schedule", required=True, metavar="STRING", help="a failing schedule (kvs1:...)")


def run(args) -> int:
    from kvtrace.errors import UsageError

    from .graph import load
    from .minimization import minimize
    from .schedule import ScheduleError, decode

    try:
        sch = decode(args.schedule)
    except ScheduleError as e:
        raise UsageError(str(e)) from None
    g = load(args.trace, sch.chunks, sch.fault)
    if (g.n_prog, len(g.move_xfer)) != (sch.n_prog, sch.n_moves):
        raise UsageError(f"the schedule is for a trace of {sch.n_prog} events and {sch.n_moves} moves; "
                        f"this one has {g.n_prog} and {len(g.move_xfer)}")
    try:
        m = minimize(g, sch.decisions, sch.chunks, sch.fault)
    except ScheduleError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:       # it fails, but not through reorderings of conflicting events
        print(f"the schedule corrupts a read, but it cannot be shrunk: {e}")
        print(f"schedule: {args.schedule.strip()}")
        return 1
    if m is None:
        print("the schedule does not corrupt any read: nothing to minimize")
        return 0
    print(f"minimized {m.original} reordering(s) to {len(m.flips)} in {m.runs} replays"
          + (f" (fault {sch.fault} kept)" if sch.fault else ""))
    if not m.flips:
        print("it fails with no reordering at all: a deterministic bug (eager fails too)")
    for line in m.lines(g):
        print("  " + line)
    print(f"schedule: {m.schedule}")
    print("replay it: kvtrace replay " + shlex.quote(args.trace) + f" --schedule {m.schedule} -o replay.kvtrace")
    return 1
