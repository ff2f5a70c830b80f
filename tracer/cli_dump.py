"""Dump a flight recorder's window now.

  kvtrace dump SESSION      trigger every process recording into SESSION (the -o of
                            `kvtrace record --ring ...`), wait for their dumps, print the trace
  kvtrace dump PID          send SIGUSR1 to a recording process (or to the `record -- CMD`
                            launcher): its whole session dumps

Each trigger writes SESSION.dumpN.kvtrace (s.kvtrace -> s.dump1.kvtrace): the last SIZE or
DURATION of every process of the session, a trace you `kvtrace check`. See docs/ring.md.
"""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help="a ring session directory, or the PID of a recording process")
    p.add_argument("--reason", default="kvtrace dump", help="why (written into the dump's manifest)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for every process's dump (session target)")


def run(args) -> int:
    import json
    import os
    import signal
    import sys
    import time

    from ..errors import UsageError
    target = args.target
    if target.isdigit():
        pid = int(target)
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            raise UsageError(f"no process {pid}") from None
        except PermissionError:
            raise UsageError(f"not allowed to signal process {pid}") from None
        print(f"sent SIGUSR1 to {pid}: its ring session dumps within a flush interval", file=sys.stderr)
        return 0
    from .ring_dump import RING_DIR, TriggerLog, dump_path, live_shards
    if not os.path.isdir(os.path.join(target, RING_DIR)):
        raise UsageError(f"{target}: not a ring session (record it with `kvtrace record --ring 30s -o {target}`)")
    live = live_shards(target)
    if not live:
        raise UsageError(f"{target}: no process of this session is recording now")
    n = TriggerLog(target).append(args.reason)
    out = dump_path(target, n)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(out, "manifest.json")) as f:
                if json.load(f).get("complete"):
                    print(out)
                    return 0
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    missing = [s for s in live if not os.path.exists(os.path.join(out, s, "shard.json"))]
    print(f"kvtrace dump: {out}: no dump from {', '.join(missing)} within {args.timeout:g} s", file=sys.stderr)
    return 1
