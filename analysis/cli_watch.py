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

A long recording is analysed through a window (--window, 60s by default): once the first
check has covered what was already recorded, each re-check holds only the last WINDOW of
events plus what they still refer to (open requests, slots still held and whoever filled
them, transfers in flight, registered memory: the flight recorder's rules), so a re-check
costs what the window holds, not what the recording has grown to. `--window all` analyses
the whole trace on every re-check.

Exit status: 0 when the trace is complete (or --timeout passed) without --fail-fast
tripping, 1 at the first error finding with --fail-fast, 2 bad input.

examples:
  kvtrace watch s.kvtrace
  kvtrace watch s.kvtrace --fail-fast
  kvtrace watch s.dump1.kvtrace --timeout 60
  kvtrace watch s.kvtrace --window 5min
"""
from __future__ import annotations

import argparse
import re

#: the shortest window: well past how long a recorder may hold events unwritten (its flush
#: interval), so what the window leaves behind was analysed by an earlier re-check
MIN_WINDOW_S = 5.0
_SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0}


def parse_window(spec: str) -> float | None:
    """``"60s"``/``"5min"``/``"1h"``/``"90"`` -> seconds; ``"all"`` -> None (the whole trace).

    Raises:
        kvtrace.errors.UsageError: anything else, or a window under MIN_WINDOW_S.
    """
    from kvtrace.errors import UsageError
    if str(spec).strip().lower() == "all":
        return None
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(spec))
    if not m or m.group(2).lower() not in _SECONDS:
        raise UsageError(f"--window {spec}: expected a duration (60s, 5min, 1h) or 'all'")
    seconds = float(m.group(1)) * _SECONDS[m.group(2).lower()]
    if seconds < MIN_WINDOW_S:
        raise UsageError(f"--window {spec}: at least {MIN_WINDOW_S:g}s (what a window leaves behind must "
                         "have been checked already), or 'all'")
    return seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (NAME.kvtrace), possibly still being written")
    p.add_argument("--fail-fast", action="store_true", help="exit 1 at the first error finding")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between polls (default 0.1)")
    p.add_argument("--settle", type=float, default=0.5,
                   help="where the shards' clocks cannot be compared: seconds a finding must persist "
                        "before it is printed (the other processes' buffers flush meanwhile; default 0.5)")
    p.add_argument("--window", default="60s", metavar="DURATION|all",
                   help="analyse the last DURATION of events plus what they still refer to (at least "
                        f"{MIN_WINDOW_S:g}s; e.g. 30s, 5min), or 'all': the whole trace on every re-check "
                        "(default 60s; needs shards stamped by this host's clock, else the whole trace)")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop after this many seconds (default: when the trace is complete)")


def run(args) -> int:
    import os
    import sys
    import time

    from kvtrace.errors import UsageError

    from .watch import Watcher
    if args.interval <= 0:
        raise UsageError("--interval must be positive")
    if os.path.exists(args.trace) and not os.path.isdir(args.trace):
        raise UsageError(f"{args.trace}: not a trace directory")
    if not os.path.exists(os.path.join(args.trace, "manifest.json")):
        # a recording not started yet: say so once, or the terminal looks hung
        print(f"kvtrace watch: waiting for a recording at {args.trace} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    from .live_session import LiveCheck
    window_s = parse_window(args.window)
    w = Watcher(args.trace, time.monotonic, check=LiveCheck(window_s=window_s), settle_s=max(0.0, args.settle))
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
            print(f"kvtrace watch: {'trace complete' if done else 'timeout'}; checks ran {w.checks_run} time(s)"
                  + _window_summary(w), file=sys.stderr)
            return 0
        time.sleep(args.interval)


def _window_summary(w) -> str:
    """How far the analysis window moved, for the closing line ('' when it never did)."""
    session = getattr(w.check, "session", None)
    window = getattr(session, "window", None)
    note = getattr(session, "window_note", None)
    if note:
        return f"; {note}"
    if window is None or not window.evictions:
        return ""
    return (f"; the analysis window moved {window.evictions} time(s), leaving {window.evicted_events:,} "
            "checked events behind")
