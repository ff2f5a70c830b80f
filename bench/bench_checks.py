"""Benchmark: every hazard check over synthetic traces of 1M and 10M events.

Generates the traces with bench/gen_synthetic.py (under /tmp, not in git), then, side by
side in one run and for each size: the Parquet index build (first open), the derived
tables (happens-before clocks, ownership, descriptor targets) and the checks. Prints
seconds, events/s and how the cost grows from the small size to the large one; the
planted-bug twin of the small size shows the checks still find what they should.

    python bench/bench_checks.py [--sizes 1000000 10000000] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import gen_synthetic  # noqa: E402

from kvtrace.analysis.findings import catalog  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402


def measure(path: str, threads: int | None) -> dict:
    t0 = time.perf_counter()
    s = TraceSession(path, threads=threads)
    t1 = time.perf_counter()
    s.derive()
    t2 = time.perf_counter()
    per = {}
    findings = []
    for name in catalog():
        t = time.perf_counter()
        findings += s.findings([name])
        per[name] = time.perf_counter() - t
    t3 = time.perf_counter()
    n = s.con.sql("select count(*) from events").fetchall()[0][0]
    nd = s.con.sql("select count(*) from descs").fetchall()[0][0]
    s.close()
    return {"events": n, "descs": nd, "index": t1 - t0, "derive": t2 - t1, "checks": t3 - t2,
            "total": t3 - t0, "analysis": t3 - t1, "per": per, "findings": findings}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dir", default="/tmp/kvtrace-bench")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    rows = []
    for n in a.sizes:
        path = os.path.join(a.dir, f"syn-{n}.kvtrace")
        shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        c = gen_synthetic.build(path, n)
        gen = time.perf_counter() - t
        m = measure(path, a.threads)
        m["gen"] = gen
        rows.append(m)
        print(f"{m['events']:>11,} events {m['descs']:>11,} descs | gen {gen:6.1f} s | index {m['index']:6.1f} s | "
              f"derive {m['derive']:6.1f} s | checks {m['checks']:6.1f} s | analysis {m['analysis']:6.1f} s "
              f"= {m['events'] / m['analysis'] / 1e6:5.2f} M events/s | findings {len(m['findings'])} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        slow = sorted(m["per"].items(), key=lambda kv: -kv[1])[:4]
        print("    slowest checks: " + ", ".join(f"{k} {v:.1f} s" for k, v in slow), flush=True)
    if len(rows) > 1:
        a0, a1 = rows[0], rows[-1]
        print(f"growth {a0['events']:,} -> {a1['events']:,} events (x{a1['events'] / a0['events']:.1f}): "
              f"analysis x{a1['analysis'] / a0['analysis']:.1f}, derive x{a1['derive'] / a0['derive']:.1f}, "
              f"checks x{a1['checks'] / a0['checks']:.1f}, index x{a1['index'] / a0['index']:.1f}")
    # the planted-bug twin: the same workload with every 97th request freeing early
    path = os.path.join(a.dir, "syn-bug.kvtrace")
    shutil.rmtree(path, ignore_errors=True)
    gen_synthetic.build(path, a.sizes[0], bug="early-free")
    m = measure(path, a.threads)
    kinds = sorted({f.check for f in m["findings"]})
    print(f"planted early-free twin ({m['events']:,} events): {len(m['findings'])} findings {kinds} "
          f"in {m['analysis']:.1f} s")


if __name__ == "__main__":
    main()
