"""Old vs new recorder code on the reference engine, interleaved: ring / file / no recording.

    .venv/bin/python bench/ab_ring_engine.py OLD_CHECKOUT [--reps 6] [--requests 200] [--workload SPEC]

One fresh process per (code, rep), old and new alternating (which goes first alternates
too); each does a warm-up run (``--warm``: one of every arm, so recording's imports and
first-use costs are paid before measuring: a long-running engine's steady state), then
the arms off, file and ring (--ring 30s) ``--rounds`` times each, in an order rotating, on workload ``small``
(or ``--workload``: a preset or a TOML file, e.g. bench/workloads/small-61layers.toml) x REQUESTS with checksums off
(what bench_ring.py --only throughput runs). The old code is the checkout at OLD_CHECKOUT
(e.g. ``git worktree add /tmp/old main``), imported through bench_real_connector's
PYTHONPATH farm. Prints best and median seconds per (code, arm), wall and process CPU (all threads: steadier
than wall on a shared machine), the wall of the step loop (``xfer``: the transfer phase; with the
bytes the prefill posts, from a file arm's trace, the same in every run, the transfer throughput),
and each code's ring and file overhead over its own no-recording runs (for ``xfer``: wall, so
throughput's loss is ``1 - 1/(1 + overhead)``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_real_connector import _farm  # noqa: E402

CHILD = """
import json, os, shutil, sys, time
from kvtrace.tracer.engine.runner import run_inprocess
from kvtrace.tracer.engine.workload import load
n, rep, tmp, warm, rounds = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
wl = load(sys.argv[6], requests=n)
arms = [("off", None), ("file", ""), ("ring", "30s")]
k = rep % 3
out = {}
steps = []   # the step loop's times (on_step after each step): its wall is the transfer phase's


def on_step(*_):
    steps.append(time.perf_counter())


def moved(d):
    # bytes the prefill posted (every xfer_post of the file arm's trace: the same in every arm)
    from kvtrace.tracer import open_trace
    ev = open_trace(d).table("events").to_pylist()
    return sum(e["nbytes"] or 0 for e in ev if e["kind"] == "xfer_post")


for arm, ring in (arms if warm else arms[:1]):   # --warm: every arm once first (imports, first-use costs)
    d = None if ring is None else os.path.join(tmp, f"warm-{arm}-{os.getpid()}.kvtrace")
    run_inprocess(wl, [], d, checksums=False, ring=ring or None)
    if d:
        if arm == "file":
            out["bytes"] = [moved(d)]
        shutil.rmtree(d, ignore_errors=True)
for r in range(rounds):
    for arm, ring in arms[(k + r) % 3:] + arms[:(k + r) % 3]:
        d = None if ring is None else os.path.join(tmp, f"{arm}-{os.getpid()}.kvtrace")
        steps.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        run_inprocess(wl, [], d, checksums=False, ring=ring or None, on_step=on_step)
        out.setdefault(arm, []).append(time.perf_counter() - t0)
        out.setdefault(arm + " cpu", []).append(time.process_time() - c0)
        out.setdefault(arm + " xfer", []).append(steps[-1] - steps[0])
        if d:
            if arm == "file" and "bytes" not in out:
                out["bytes"] = [moved(d)]
            shutil.rmtree(d, ignore_errors=True)
print(json.dumps(out))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("--reps", type=int, default=6)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--warm", action="store_true",
                   help="each process first runs every arm once (imports and first-use costs paid: the steady "
                        "state of a long-running engine), then measures")
    p.add_argument("--rounds", type=int, default=1, help="runs of each arm per process (arms rotate)")
    p.add_argument("--workload", default="small", help="a preset name or a workload TOML file (default small)")
    a = p.parse_args(argv)
    load0, t0 = os.getloadavg(), time.time()
    times = {(c, arm): [] for c in ("old", "new")
             for arm in ("off", "file", "ring", "off cpu", "file cpu", "ring cpu", "off xfer", "file xfer", "ring xfer")}
    moved = set()
    with tempfile.TemporaryDirectory(prefix="kvtrace-ab-") as tmp:
        farm = _farm(a.old, os.path.join(tmp, "old"))
        for rep in range(a.reps):
            for code in (("old", "new") if rep % 2 == 0 else ("new", "old")):
                env = dict(os.environ)
                if code == "old":
                    env["PYTHONPATH"] = os.pathsep.join(x for x in (farm, env.get("PYTHONPATH")) if x)
                r = subprocess.run([sys.executable, "-c", CHILD, str(a.requests), str(rep), tmp,
                                    "1" if a.warm else "0", str(a.rounds), os.path.abspath(a.workload)
                                    if os.path.exists(a.workload) else a.workload], env=env,
                                   capture_output=True, text=True, cwd=tmp)
                if r.returncode:
                    raise SystemExit(f"{code} rep {rep} failed: {r.stderr[-1500:]}")
                for arm, s in json.loads(r.stdout.strip().splitlines()[-1]).items():
                    if arm == "bytes":
                        moved.update(s)
                    else:
                        times[(code, arm)].extend(s)
    load1 = os.getloadavg()
    print(f"reference engine, workload {a.workload} x{a.requests}, checksums off, {a.reps} processes per code x "
          f"{a.rounds} run(s) per arm{', after a warm-up run of every arm' if a.warm else ''}, "
          f"old = {a.old}, new = {ROOT}")
    for (code, arm), v in times.items():
        print(f"  {code} {arm:8s} best {min(v):6.3f} s  median {statistics.median(v):6.3f} s  runs "
              + " ".join(f"{x:.3f}" for x in v))
    if len(moved) == 1:   # transfer throughput: bytes posted / wall of the step loop (the transfer phase)
        (b,) = moved
        for code in ("old", "new"):
            for arm in ("off", "file", "ring"):
                v = [b / x / 1e6 for x in times[(code, arm + " xfer")]]
                print(f"  {code} {arm:4s} transfer throughput  best {max(v):7.1f} MB/s  median "
                      f"{statistics.median(v):7.1f} MB/s  ({b / 1e6:.1f} MB a run)")
    else:
        print(f"  bytes posted differ between runs ({sorted(moved)}): no throughput figure")
    for code in ("old", "new"):
        for arm in ("file", "ring", "file cpu", "ring cpu", "file xfer", "ring xfer"):
            off = times[(code, "off" + arm[len(arm.split()[0]):])]   # "ring cpu" -> "off cpu"
            v = times[(code, arm)]
            print(f"  {code}: {arm} vs off  best {min(v) / min(off) - 1:+7.1%}  median "
                  f"{statistics.median(v) / statistics.median(off) - 1:+7.1%}")
    for arm in ("file", "ring", "file cpu", "ring cpu", "file xfer", "ring xfer"):
        o, n = times[("old", arm)], times[("new", arm)]
        print(f"  new/old {arm}: best {min(n) / min(o):.3f}  median {statistics.median(n) / statistics.median(o):.3f}")
    print(f"  ({time.time() - t0:.0f} s; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
