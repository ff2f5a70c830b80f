"""Benchmark: what issue 16's answers cost beside the existing checks, on the synthetic
traces of bench/gen_synthetic.py (clean, and its planted early-free twin).

Side by side in one run and one session per trace: the derived tables, the existing
checksum_mismatch check with its per-read prediction (read_predict, rebuilt: the reference,
the answers reuse that prediction), the
four new checks, the attribution of corrupted reads and the layout differences. Prints
seconds and each cost as a ratio of checksum_mismatch's.

    python bench/bench_answers.py [--size 1000000] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import gen_synthetic  # noqa: E402

from kvtrace.analysis.attribution import attribute  # noqa: E402
from kvtrace.analysis.layouts import side_diff  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402

NEW = ("owner_overwrites_delivered", "request_waiting", "layout_mismatch", "buffer_class_not_sent")


def measure(path: str, threads) -> list[tuple[str, float, int]]:
    s = TraceSession(path, threads=threads)
    out = []
    t = time.perf_counter()
    s.derive()
    out.append(("derive (all derived tables)", time.perf_counter() - t, 0))
    from kvtrace.model.registry import registry
    t = time.perf_counter()   # the per-read prediction checksum_mismatch and attribution share, rebuilt
    s.con.execute(registry()["read_predict"].sql)
    out.append(("read_predict (rebuilt)", time.perf_counter() - t, 0))
    for name in ("checksum_mismatch",) + NEW:
        t = time.perf_counter()
        n = len(s.findings([name]))
        out.append((name, time.perf_counter() - t, n))
    t = time.perf_counter()
    n = len(attribute(s))
    out.append(("attribution", time.perf_counter() - t, n))
    t = time.perf_counter()
    n = len(side_diff(s))
    out.append(("layout differences", time.perf_counter() - t, n))
    s.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--dir", default="/tmp/kvtrace-bench")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    for bug in (None, "early-free"):
        path = os.path.join(a.dir, f"answers-{a.size}-{bug or 'clean'}.kvtrace")
        shutil.rmtree(path, ignore_errors=True)
        gen_synthetic.build(path, a.size, bug=bug)
        rows = measure(path, a.threads)
        ref = sum(sec for name, sec, _ in rows if name in ("checksum_mismatch", "read_predict (rebuilt)"))
        print(f"{a.size:,} events, {bug or 'clean'} (load {os.getloadavg()[0]:.1f}):")
        for name, sec, n in rows:
            print(f"  {name:30} {sec:7.2f} s  x{sec / ref:5.2f} of checksum_mismatch with its prediction  ({n} rows)")


if __name__ == "__main__":
    main()
