"""Follow a trace while it is being written and print each new finding as it lands.

Works on a recording in progress (`kvtrace record -o s.kvtrace` in another terminal) and
on a flight recorder's dump being written (s.dump1.kvtrace). The trace stays open for the
whole watch: a re-check loads only the rows the streams gained, and runs when a shard's
streams grew. Each process flushes on its own, so a re-check analyses every shard up to
the time before which all processes' events are written (the recorders' clock, when they
share this host's); a finding there is printed at once. Where the clocks cannot be
compared (shards recorded on other hosts), a finding is printed once it persisted
--settle seconds. A recording in progress ends mid-run, so `leak` waits for the trace to
be complete.

Exit status: 0 when the trace is complete (or --timeout passed) without --fail-fast
tripping, 1 at the first error finding with --fail-fast, 2 bad input.

examples:
  kvtrace watch s.kvtrace
  kvtrace watch s.kvtrace --fail-fast
  kvtrace watch s.dump1.kvtrace --timeout 60
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace), possibly still being written")
    p.add_argument("--fail-fast", action="store_true", help="exit 1 at the first error finding")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between polls (default 0.1)")
    p.add_argument("--settle", type=float, default=0.5,
                   help="where the shards' clocks cannot be compared: seconds a finding must persist "
                        "before it is printed (the other processes' buffers flush meanwhile; default 0.5)")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop after this many seconds (default: when the trace is complete)")


def run(args) -> int:
    import os
    import time

    from kvtrace.errors import UsageError

    from .watch import Watcher
    if args.interval <= 0:
        raise UsageError("--interval must be positive")
    if os.path.exists(args.trace) and not os.path.isdir(args.trace):
        raise UsageError(f"{args.trace}: not a trace directory")
    w = Watcher(args.trace, time.monotonic, settle_s=max(0.0, args.settle))
    try:
        return _follow(args, w)
    finally:
        w.close()


def _follow(args, w) -> int:
    import sys
    import time
    start = time.monotonic()
    while True:
        done = w.complete()          # read before the poll: a complete trace gets one last poll
        if done:
            w.settle_s = 0.0         # nothing more will land: what is found now is final
        errors = []

        def show(r) -> None:
            if args.fail_fast and any(errors):
                return               # stopping at the first error: print nothing after it
            f = r.finding
            where = "/".join(str(x) for x in (f.pool, f.layer, f.slot) if x is not None)
            print(f"[{r.seen_at - start:7.2f}s] {f.severity.upper():7s} {f.check}: {f.message}"
                  + (f" ({where})" if where else ""), flush=True)
            errors.append(f.severity == "error")
        # findings final before the re-check ends print at once (emit); the rest when it returns
        for r in w.poll(emit=show):
            show(r)
        if args.fail_fast and any(errors):
            return 1
        if done or (args.timeout is not None and time.monotonic() - start > args.timeout):
            print(f"kvtrace watch: {'trace complete' if done else 'timeout'}; checks ran {w.checks_run} time(s)",
                  file=sys.stderr)
            return 0
        time.sleep(args.interval)
