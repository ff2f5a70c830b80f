"""Replay verdicts of every committed trace, one line each: recorded / eager / lazy as
corrupted/verified slot-reads with the recorded-checksum comparison (compared:differing:not
compared), and how many conflicts seeds 0-29 fail. For before/after comparisons of the
verifier: run it with each checkout's interpreter.

    .venv/bin/python bench/replay_verdicts.py [ROOT]     # ROOT: a checkout (default: this one)
"""
import glob
import os
import sys

from kvtrace.replay.api import make_executor, make_scheduler, run_graph
from kvtrace.replay.graph import load


def main(root: str) -> None:
    for p in sorted(glob.glob(os.path.join(root, "traces", "*.kvtrace"))):
        g = load(p)
        row = []
        for s in ("recorded", "eager", "lazy"):
            v = run_graph(g, make_scheduler(s), make_executor()).verdict
            row.append(f"{s}={len(v.corrupted)}/{v.reads_verified} rec={v.recorded_compared}:"
                       f"{v.recorded_differs}:{getattr(v, 'recorded_skipped', '-')}")
        nc = sum(run_graph(g, make_scheduler("conflicts", k), make_executor()).verdict.failed for k in range(30))
        print(os.path.basename(p), " ".join(row), f"conflicts0-29 failing={nc}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
