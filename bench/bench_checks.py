"""Benchmark: every hazard check over synthetic traces of 1M and 10M events (100M by hand).

Generates the traces with bench/gen_synthetic.py (under /tmp, not in git), then, side by
side in one run and for each size: the Parquet index build (first open), the derived
tables (happens-before clocks, ownership, descriptor targets) and the checks, each with
its wall time and peak RSS ("cold": nothing derived yet; then the derived tables are
saved beside the index, and "warm" is a second model of the trace reading them back and
running the checks, what a second `kvtrace check` or the TUI does). Prints events/s, how the cost grows per ×10 events, and — at
the smallest size, in the same run — the ratio to a naive checker of the same hazards
(bench/naive_checker/*.sql: straightforward DuckDB SQL over the same index). The
planted-bug twin of the small size shows both still find what they should.

    python bench/bench_checks.py [--sizes 1000000 10000000] [--threads 2] [--memory 4GB] [--ab REV] [--reuse]

100M events (by hand, not in CI; ~23 GB of trace + ~3 GB index + the derived tables and
spill under the trace's _index/, so ~45 GB free disk; generated ~0.75 GB / ~2.5 min):

    python bench/bench_checks.py --sizes 100000000 --threads 2 --memory 3GB --reuse --dir DIR
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))

import gen_synthetic  # noqa: E402
import naive_run  # noqa: E402

from kvtrace.analysis.findings import catalog  # noqa: E402
from kvtrace.analysis.session import TraceSession  # noqa: E402
from kvtrace.model.index import index_dir_for  # noqa: E402
from kvtrace.model.persist import DERIVED_DIR  # noqa: E402


class PeakRSS:
    """Samples this process's resident set every 20 ms; ``step()`` returns the peak since
    the previous call (the kernel's own high-water mark never goes down)."""

    def __init__(self) -> None:
        self.peak = self.now()
        self._stop = False
        threading.Thread(target=self._loop, daemon=True).start()

    @staticmethod
    def now() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _loop(self) -> None:
        while not self._stop:
            self.peak = max(self.peak, self.now())
            time.sleep(0.02)

    def step(self) -> float:
        p = max(self.peak, self.now())
        self.peak = self.now()
        return p / 2**30


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(path: str, threads: int | None, memory: str | None, rss: PeakRSS) -> dict:
    """Cold (no derived tables saved: derive, then the checks, then the save) and warm (a
    second model of the trace reads the saved tables, then runs the checks)."""
    kw = {"memory_limit": memory} if memory else {}
    shutil.rmtree(os.path.join(index_dir_for(path), DERIVED_DIR), ignore_errors=True)   # cold
    rss.step()
    t0 = time.perf_counter()
    s = TraceSession(path, threads=threads, **kw)
    t1 = time.perf_counter()
    r_index = rss.step()
    s.derive()
    t2 = time.perf_counter()
    r_derive = rss.step()
    per = {}
    findings = []
    for name in catalog():
        t = time.perf_counter()
        findings += s.findings([name])
        per[name] = time.perf_counter() - t
    t3 = time.perf_counter()
    r_checks = rss.step()
    n = s.con.sql("select count(*) from events").fetchall()[0][0]
    nd = s.con.sql("select count(*) from descs").fetchall()[0][0]
    index_dir = s.index_dir
    t4 = time.perf_counter()
    s.close()              # writes the derived tables beside the index (kvtrace/model/persist.py)
    t5 = time.perf_counter()
    r_save = rss.step()
    # warm: what a second `kvtrace check` (or the TUI after it) does
    w0 = time.perf_counter()
    s = TraceSession(path, threads=threads, **kw)
    s.derive()
    w1 = time.perf_counter()
    warm = s.findings()
    w2 = time.perf_counter()
    r_warm = rss.step()
    s.close()
    same = sorted(map(repr, warm)) == sorted(map(repr, findings))
    return {"events": n, "descs": nd, "index": t1 - t0, "derive": t2 - t1, "checks": t3 - t2,
            "total": t3 - t0, "analysis": t3 - t1, "per": per, "findings": findings,
            "save": t5 - t4, "warm_open": w1 - w0, "warm_checks": w2 - w1, "warm": w2 - w0, "warm_same": same,
            "rss": {"index": r_index, "derive": r_derive, "checks": r_checks, "save": r_save, "warm": r_warm},
            "index_dir": index_dir}


def ab_checks(path: str, rev: str, threads: int | None, memory: str | None, reps: int = 3) -> None:
    """Every check's SQL at git revision ``rev`` against the working tree's, interleaved on one
    derived session (best of ``reps`` each), with whether their rows agree."""
    kw = {"memory_limit": memory} if memory else {}
    s = TraceSession(path, threads=threads, **kw)
    s.derive()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tot_old = tot_new = 0.0
    print(f"    per-check A/B: {rev} vs working tree (best of {reps}, interleaved; load {load()})")
    for name, c in catalog().items():
        old = subprocess.run(["git", "-C", root, "show", f"{rev}:analysis/sql/{name}.sql"],
                             capture_output=True, text=True).stdout or None
        if old is None:
            continue
        to, tn = [], []
        for _ in range(reps):
            t = time.perf_counter()
            ro = s.con.sql(old).fetchall()
            to.append(time.perf_counter() - t)
            t = time.perf_counter()
            rn = s.con.sql(c.sql).fetchall()
            tn.append(time.perf_counter() - t)
        same = sorted(map(repr, ro)) == sorted(map(repr, rn))
        tot_old, tot_new = tot_old + min(to), tot_new + min(tn)
        print(f"      {name:28s} {min(to):6.2f} s -> {min(tn):6.2f} s  x{min(to) / max(min(tn), 1e-6):5.1f}  "
              f"rows {len(ro)}/{len(rn)} {'same' if same else 'DIFFERENT'}", flush=True)
    print(f"      {'all checks':28s} {tot_old:6.2f} s -> {tot_new:6.2f} s  x{tot_old / max(tot_new, 1e-6):5.1f}  (load {load()})")
    s.close()


def naive(index_dir: str, threads: int | None, memory: str | None, rss: PeakRSS) -> tuple[float, float, dict]:
    rss.step()
    t = time.perf_counter()
    res = naive_run.run(index_dir, threads, memory)
    return time.perf_counter() - t, rss.step(), res


#: the naive checker runs at the first size up to this (at 100M events it has no memory bound)
NAIVE_MAX = 10_000_000
#: the planted twin's size at most (a 100M twin would be another 23 GB on disk)
TWIN_MAX = 1_000_000


def per10(a: float, b: float, na: int, nb: int) -> float:
    """The growth factor of a cost per ×10 events between two sizes."""
    return (b / a) ** (1 / math.log10(nb / na)) if a > 0 and nb > na else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--memory", default=None, help="DuckDB memory cap (default: kvtrace's)")
    ap.add_argument("--dir", default="/tmp/kvtrace-bench")
    ap.add_argument("--ab", metavar="REV", default=None,
                    help="also time every check's SQL at git revision REV against the working tree's, "
                         "interleaved on the smallest size (findings compared)")
    ap.add_argument("--reuse", action="store_true", help="reuse traces already generated under --dir")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rss = PeakRSS()
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"machine: {os.cpu_count()} cores | {up}")
    rows = []
    for n in a.sizes:
        path = os.path.join(a.dir, f"syn-{n}.kvtrace")
        t = time.perf_counter()
        if not (a.reuse and os.path.isdir(path)):
            shutil.rmtree(path, ignore_errors=True)
            gen_synthetic.build(path, n)
        gen = time.perf_counter() - t
        m = measure(path, a.threads, a.memory, rss)
        m["gen"] = gen
        rows.append(m)
        r = m["rss"]
        print(f"{m['events']:>11,} events {m['descs']:>11,} descs | gen {gen:6.1f} s | "
              f"index {m['index']:6.1f} s {r['index']:4.1f} GB | derive {m['derive']:6.1f} s {r['derive']:4.1f} GB | "
              f"checks {m['checks']:6.1f} s {r['checks']:4.1f} GB | analysis {m['analysis']:6.1f} s "
              f"= {m['events'] / m['analysis'] / 1e6:5.2f} M events/s | findings {len(m['findings'])} "
              f"(load {load()})", flush=True)
        print(f"    saving the derived tables {m['save']:5.1f} s {r['save']:4.1f} GB (after the checks, at close) | "
              f"warm (tables saved): open + read back {m['warm_open']:5.1f} s, checks {m['warm_checks']:5.1f} s "
              f"{r['warm']:4.1f} GB = {m['warm']:5.1f} s, findings {'the same' if m['warm_same'] else 'DIFFERENT'} "
              f"(load {load()})", flush=True)
        slow = sorted(m["per"].items(), key=lambda kv: -kv[1])[:4]
        print("    slowest checks: " + ", ".join(f"{k} {v:.1f} s" for k, v in slow), flush=True)
        if n == a.sizes[0] and a.ab:
            ab_checks(path, a.ab, a.threads, a.memory)
        if n == a.sizes[0] and n <= NAIVE_MAX:
            ns, nr, res = naive(m["index_dir"], a.threads, a.memory, rss)
            print(f"    naive checker ({len(res)} hazards, bench/naive_checker) {ns:6.1f} s {nr:4.1f} GB, "
                  f"{sum(c for c, _ in res.values())} findings | kvtrace analysis / naive = x{m['analysis'] / ns:.2f} cold, "
                  f"x{m['warm'] / ns:.2f} warm (load {load()})", flush=True)
    for a0, a1 in zip(rows, rows[1:]):
        f = lambda k: per10(a0[k], a1[k], a0["events"], a1["events"])  # noqa: E731
        # derive + save: a trace whose derived tables will pass the memory share (10M under the
        # default cap) writes each to its file while deriving, a smaller one (1M) at close, after
        # the checks: derive alone compares building with building + writing
        ds = per10(a0["derive"] + a0["save"], a1["derive"] + a1["save"], a0["events"], a1["events"])
        print(f"growth {a0['events']:,} -> {a1['events']:,} events, per x10 events: analysis x{f('analysis'):.1f}, "
              f"derive x{f('derive'):.1f} (derive + save x{ds:.1f}), checks x{f('checks'):.1f}, index x{f('index'):.1f}, "
              f"warm x{f('warm'):.1f}")
    # the planted-bug twin: the same workload with every 97th request freeing early
    twin = a.sizes[0] if a.sizes[0] <= NAIVE_MAX else TWIN_MAX
    path = os.path.join(a.dir, "syn-bug.kvtrace" if twin == a.sizes[0] else f"syn-bug-{twin}.kvtrace")
    if not (a.reuse and os.path.isdir(path)):
        shutil.rmtree(path, ignore_errors=True)
        gen_synthetic.build(path, twin, bug="early-free")
    m = measure(path, a.threads, a.memory, rss)
    kinds = sorted({f.check for f in m["findings"]})
    _, _, res = naive(m["index_dir"], a.threads, a.memory, rss)
    nk = sorted(k for k, (c, _) in res.items() if c)
    print(f"planted early-free twin ({m['events']:,} events): {len(m['findings'])} findings {kinds} "
          f"in {m['analysis']:.1f} s cold, {m['warm']:.1f} s warm (findings {'the same' if m['warm_same'] else 'DIFFERENT'}); "
          f"naive: {nk}")


if __name__ == "__main__":
    main()
