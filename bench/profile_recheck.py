"""Where one `kvtrace watch` re-check spends its time, statement by statement.

Records a reference-engine trace (or takes --trace), copies it as a recording in
progress would look (every shard not closed, the manifest not complete), opens a
LiveSession on it with one worker (statements one after another, so each is timed
alone) and re-checks it --reps times. Prints, per step (the cut, each derived object,
each check, the session's own queries), the median wall time and, for the SQL ones, the
median time of EXPLAIN of the same statement (bind + optimize + plan, no execution):
the fixed per-statement cost.

    .venv/bin/python bench/profile_recheck.py [--requests 800 --reps 5] [--trace T]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def record(tmp: str, requests: int, after: int) -> str:
    out = os.path.join(tmp, "prof.kvtrace")
    toml = os.path.join(tmp, "prof.toml")
    with open(toml, "w") as f:
        f.write(f'name = "prof"\nrequests = {requests}\nconcurrency = 4\n')
    subprocess.run([sys.executable, "-m", "kvtrace", "record", "--workload", toml, "--inject", "early-src-free",
                    "--inject-after", str(after), "--no-progress", "-o", out], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "NIXL_LOG_LEVEL": "WARN"})
    return out


def as_live(src: str, dst: str) -> None:
    """A copy of ``src`` as a recording in progress: shards not closed, manifest not complete."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_*"))
    man = json.load(open(os.path.join(dst, "manifest.json")))
    man["complete"] = False
    json.dump(man, open(os.path.join(dst, "manifest.json"), "w"))
    for d in os.listdir(dst):
        p = os.path.join(dst, d, "shard.json")
        if os.path.exists(p):
            info = json.load(open(p))
            info["closed"] = False
            info.pop("events", None)
            json.dump(info, open(p, "w"))


def one(s, times: dict, plans: dict) -> None:
    """One re-check of LiveSession ``s``, each step timed (workers=1: in order)."""
    from kvtrace.analysis.findings import catalog, rows_to_findings
    from kvtrace.model.registry import build_order, registry

    def tick(name, fn, sql=None):
        t0 = time.perf_counter()
        r = fn()
        times[name].append(time.perf_counter() - t0)
        if sql is not None:
            t0 = time.perf_counter()
            s.con.execute("EXPLAIN " + sql).fetchall()
            plans[name].append(time.perf_counter() - t0)
        return r

    tick("(refresh: read streams, load, cut)", lambda: s.refresh(force=True))   # as if the cut moved
    objs = registry()
    for n in build_order(objs, None):
        d = objs[n]
        if n in s._built:        # built by the cut (the shard list)
            continue
        if d.build is not None:
            tick(f"derive {n} (python)", lambda: (s.build_python(d), s._built.add(n)))
        else:
            tick(f"derive {n}", lambda: (s.create_sql(d), s._built.add(n)), d.sql)
    from kvtrace.model.cut import ordering_unknowns
    tick("(ordering_unknowns)", lambda: ordering_unknowns(s))
    caps = tick("(capabilities)", s.capabilities)
    for n, c in catalog().items():
        if all(caps.get(x) for x in c.needs):
            tick(f"check {n}", lambda: rows_to_findings(n, s.query(c.sql)), c.sql)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--after", type=int, default=400)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--trace", default=None, help="a finished trace to profile (default: record one)")
    args = ap.parse_args()
    from kvtrace.analysis.live_session import LiveSession
    tmp = tempfile.mkdtemp(prefix="kvtrace-prof-")
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    try:
        src = args.trace or record(tmp, args.requests, args.after)
        live = os.path.join(tmp, "live.kvtrace")
        as_live(src, live)
        times, plans = defaultdict(list), defaultdict(list)
        s = LiveSession(live, workers=1, now_ns=lambda: 1 << 62)
        try:
            s.derive()
            s.findings()
            for _ in range(args.reps):
                one(s, times, plans)
        finally:
            s.close()
        tot = sum(statistics.median(v) for v in times.values())
        ptot = sum(statistics.median(v) for v in plans.values())
        print(f"[profile] one re-check, statements in order, median of {args.reps}: total {tot:.3f} s; "
              f"{len(plans)} SQL statements whose EXPLAIN (bind+optimize+plan) sums to {ptot:.3f} s")
        for k, v in sorted(times.items(), key=lambda kv: -statistics.median(kv[1])):
            p = f"   plan {statistics.median(plans[k]) * 1e3:6.1f} ms" if k in plans else ""
            print(f"  {statistics.median(v) * 1e3:7.1f} ms  {k}{p}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
