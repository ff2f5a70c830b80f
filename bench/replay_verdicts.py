"""Replay verdicts of every committed trace (traces/*.kvtrace, then tests/replay/data/*.kvtrace),
one line each: recorded / eager / lazy as corrupted/verified slot-reads with the
recorded-checksum comparison (compared:differing:not compared), how many conflicts seeds
0-29 fail, whether pct seed 7 fails and how many pct seeds 0-29 do. For before/after
comparisons of the verifier or the graph: run it with each checkout's interpreter.

    .venv/bin/python bench/replay_verdicts.py [ROOT]     # ROOT: a checkout (default: this one)
    .venv/bin/python bench/replay_verdicts.py A.kvtrace B.kvtrace ...   # just these traces
"""
import argparse
import glob
import os

from kvtrace.replay.api import make_executor, make_scheduler, run_graph
from kvtrace.replay.graph import load

SEEDS = range(30)


def main(root: str, traces=()) -> None:
    paths = list(traces)
    if not paths:
        paths = sorted(glob.glob(os.path.join(root, "traces", "*.kvtrace")))
        paths += sorted(glob.glob(os.path.join(root, "tests", "replay", "data", "*.kvtrace")))
    for p in paths:
        g = load(p)
        row = []
        for s in ("recorded", "eager", "lazy"):
            v = run_graph(g, make_scheduler(s), make_executor()).verdict
            row.append(f"{s}={len(v.corrupted)}/{v.reads_verified} rec={v.recorded_compared}:"
                       f"{v.recorded_differs}:{getattr(v, 'recorded_skipped', '-')}")
        nc = sum(run_graph(g, make_scheduler("conflicts", k), make_executor()).verdict.failed for k in SEEDS)
        pct = [run_graph(g, make_scheduler("pct", k), make_executor()).verdict.failed for k in SEEDS]
        print(os.path.relpath(p, root), " ".join(row), f"conflicts0-29 failing={nc}",
              f"pct7={'failed' if pct[7] else 'clean'} pct0-29 failing={sum(pct)}", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."),
                    help="a checkout whose traces to replay (default: this one); the code is the interpreter's")
    ap.add_argument("traces", nargs="*", help="trace directories to replay instead (ROOT a .kvtrace too)")
    a = ap.parse_args()
    if a.root.rstrip("/").endswith(".kvtrace"):   # traces named one by one
        main(os.getcwd(), [a.root] + a.traces)
    else:
        main(a.root, a.traces)
