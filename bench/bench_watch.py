"""How soon `kvtrace watch` prints a hazard after its facts are flushed, on a live
reference-engine recording, and what one re-check costs, step by step.

1. Live: ``kvtrace record --workload ... --inject early-src-free --inject-after N`` runs in
   a subprocess while a Watcher follows the trace (real clocks, polls every 0.1 s). A
   sampler thread logs every stream file's size every 10 ms. After the recording, for
   each of the first findings watch printed, the moment its facts were on disk is found
   by bisecting those logged snapshots: a copy of the trace cut to a snapshot's sizes
   (shards marked not closed) is checked with `kvtrace check`'s session; the first
   snapshot that shows the finding is when it became findable. Latency = when watch
   printed it - that moment. Arms, one recording each, interleaved per rep:
   ``early`` (this watcher: derived objects and checks as one graph, each check's
   findings printed as soon as they are final, an unchanged refresh skipped),
   ``whole`` (the watcher before: every derived object, then every check, then print;
   same open model, rows appended, time-frontier cut) and, with --arms, ``fresh`` (the
   one before that: every re-check opens the trace anew, index and all, and a finding
   waits 0.5 s and a second check before it prints).
2. Re-check cost on the finished trace, alternating: a fresh TraceSession (index rebuilt)
   vs a forced LiveSession re-check (nothing new to load, so: cut, derive, checks) done
   whole and early (with when the first findings were handed out).

    .venv/bin/python bench/bench_watch.py [--requests 800 --after 400 --reps 2 --findings 3]
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
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sizes(path: str) -> tuple:
    """((shard, file, size), ...) of every stream file now."""
    out = []
    try:
        shards = sorted(d for d in os.listdir(path) if not d.startswith(("_", ".")))
    except OSError:
        return ()
    for d in shards:
        sdir = os.path.join(path, d)
        if not os.path.isdir(sdir):
            continue
        for f in sorted(os.listdir(sdir)):
            if f.endswith(".arrows"):
                try:
                    out.append((d, f, os.path.getsize(os.path.join(sdir, f))))
                except OSError:
                    pass
    return tuple(out)


class Sampler(threading.Thread):
    """Logs (unix time, sizes) whenever a stream file's size changed, every 10 ms."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.log, self.stop = path, [], False

    def run(self) -> None:
        last = None
        while not self.stop:
            s = sizes(self.path)
            if s and s != last:
                self.log.append((time.time(), s))
                last = s
            time.sleep(0.01)


def cut_copy(src: str, snap: tuple, dst: str) -> None:
    """A copy of trace ``src`` as it was at snapshot ``snap``: each stream cut to its
    logged size, every shard marked not closed, the manifest not complete."""
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    man = json.load(open(os.path.join(src, "manifest.json")))
    man["complete"] = False
    json.dump(man, open(os.path.join(dst, "manifest.json"), "w"))
    for shard in {d for d, _, _ in snap}:
        os.makedirs(os.path.join(dst, shard))
        info = json.load(open(os.path.join(src, shard, "shard.json")))
        info["closed"] = False
        info.pop("events", None)
        json.dump(info, open(os.path.join(dst, shard, "shard.json"), "w"))
    for shard, f, size in snap:
        with open(os.path.join(src, shard, f), "rb") as a, open(os.path.join(dst, shard, f), "wb") as b:
            b.write(a.read(size))


def findable_at(trace: str, log: list, key: tuple, tmp: str, before: float) -> float | None:
    """Unix time of the first logged snapshot (up to ``before``) in which `check` finds a
    finding of identity ``key``."""
    from kvtrace.analysis.session import TraceSession
    from kvtrace.analysis.watch import identity

    def has(i: int) -> bool:
        d = os.path.join(tmp, "cut.kvtrace")
        cut_copy(trace, log[i][1], d)
        try:
            with TraceSession(d) as s:
                return any(identity(f) == key for f in s.findings())
        except Exception:   # a snapshot too early to open (no schema yet)
            return False
    lo, hi = 0, max(0, len([x for x in log if x[0] <= before]) - 1)
    if not has(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if has(mid):
            hi = mid
        else:
            lo = mid + 1
    return log[lo][0]


def live_run(arm: str, requests: int, after: int, tmp: str, nfind: int) -> dict:
    from kvtrace.analysis.live_session import LiveCheck
    from kvtrace.analysis.watch import Watcher, identity, run_checks
    out = os.path.join(tmp, f"watched-{arm}.kvtrace")
    shutil.rmtree(out, ignore_errors=True)
    toml = os.path.join(tmp, "watched.toml")
    with open(toml, "w") as f:
        f.write(f'name = "watched"\nrequests = {requests}\nconcurrency = 4\n')
    sampler = Sampler(out)
    sampler.start()
    proc = subprocess.Popen([sys.executable, "-m", "kvtrace", "record", "--workload", toml, "--inject",
                             "early-src-free", "--inject-after", str(after), "--no-progress", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "NIXL_LOG_LEVEL": "WARN"})
    t_start = time.time()
    if arm in ("early", "whole"):
        check = LiveCheck(early=arm == "early")
        w = Watcher(out, time.time, check=check)
    else:
        timed = {}

        def check(p):
            t0 = time.perf_counter()
            r = run_checks(p)
            timed["steps"] = {"open+derive+checks": time.perf_counter() - t0}
            return r
        w = Watcher(out, time.time, check=check, settle_s=0.5)
    reports, steps = [], []
    n = 0
    while True:
        done = proc.poll() is not None
        t0 = time.perf_counter()
        # as `kvtrace watch` prints: findings handed out during the re-check at once, the rest after
        got = w.poll(emit=lambda r: reports.append((r, time.time())))
        if w.checks_run != n:
            n = w.checks_run
            st = dict(check.steps if arm != "fresh" else timed["steps"])
            st["total"] = time.perf_counter() - t0
            steps.append(st)
        reports += [(r, time.time()) for r in got]
        if done:
            w.settle_s = 0.0
            reports += [(r, time.time()) for r in w.poll(emit=lambda r: reports.append((r, time.time())))]
            break
        time.sleep(0.1)
    t_end = time.time()
    w.close()
    time.sleep(0.05)
    sampler.stop = True
    sampler.join()
    log = sampler.log + [(time.time(), sizes(out))]
    res = {"arm": arm, "checks": w.checks_run, "steps": steps, "wall": t_end - t_start, "latency": []}
    for r, printed in reports[:nfind]:
        at = findable_at(out, log, identity(r.finding), tmp, printed)
        during = printed < t_end - 0.5
        res["latency"].append((r.finding.check, None if at is None else printed - at, during))
    res["reports"] = len(reports)
    shutil.rmtree(out, ignore_errors=True)
    return res


def recheck_cost(requests: int, after: int, tmp: str, reps: int) -> None:
    from kvtrace.analysis.live_session import LiveCheck
    from kvtrace.analysis.session import TraceSession
    out = os.path.join(tmp, "final.kvtrace")
    toml = os.path.join(tmp, "final.toml")
    with open(toml, "w") as f:
        f.write(f'name = "final"\nrequests = {requests}\nconcurrency = 4\n')
    subprocess.run([sys.executable, "-m", "kvtrace", "record", "--workload", toml, "--inject", "early-src-free",
                    "--inject-after", str(after), "--no-progress", "-o", out], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "NIXL_LOG_LEVEL": "WARN"})
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs if f.endswith(".arrows"))
    arms = {"whole": LiveCheck(early=False), "early": LiveCheck(early=True)}
    for c in arms.values():
        c(out)
    fresh_t, t, first, steps = [], {a: [] for a in arms}, [], {a: [] for a in arms}
    b = {}
    for _ in range(reps):
        shutil.rmtree(os.path.join(out, "_index"), ignore_errors=True)
        t0 = time.perf_counter()
        with TraceSession(out, keep_derived=False) as s:
            a = s.findings()
        fresh_t.append(time.perf_counter() - t0)
        for arm, c in arms.items():
            s = c.session
            got = []
            t0 = time.perf_counter()
            s.refresh(force=True)              # as if the cut moved: every object and check anew
            t1 = time.perf_counter()
            if arm == "whole":
                s.derive()
            b[arm] = s.findings(on_final=lambda fs: got.append(time.perf_counter()) if fs and not got else None)
            t[arm].append(time.perf_counter() - t0)
            steps[arm].append(t1 - t0)
            if got:
                first.append(got[0] - t0)
    for c in arms.values():
        c.close()
    key = lambda fs: sorted(f.check + str(f.request) for f in fs)  # noqa: E731
    same = key(a) == key(b["whole"]) == key(b["early"])
    print(f"[recheck] finished trace of {requests} requests ({size / 1e6:.1f} MB of streams), {reps} reps alternating; "
          f"same findings: {same}")
    fm = statistics.median(fresh_t)
    print(f"  fresh session (index, open, cut, derive, checks)  median {fm:5.2f} s  "
          f"runs " + " ".join(f"{x:.2f}" for x in fresh_t))
    for arm in arms:
        m = statistics.median(t[arm])
        print(f"  live re-check {arm:5s} (cut, derive, checks)       median {m:5.2f} s  "
              f"runs " + " ".join(f"{x:.2f}" for x in t[arm]) + f"   ratio to fresh {m / fm:.2f}"
              f"   (of which the cut: median {statistics.median(steps[arm]):.2f} s)")
    if first:
        print(f"  early: first findings handed out after median {statistics.median(first):.2f} s  runs "
              + " ".join(f"{x:.2f}" for x in first))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--after", type=int, default=400)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--findings", type=int, default=3, help="findings per run whose latency is measured")
    ap.add_argument("--arms", default="early,whole", help="of early, whole, fresh")
    ap.add_argument("--only", choices=("live", "recheck"), default=None)
    ap.add_argument("--recheck-reps", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    tmp = tempfile.mkdtemp(prefix="kvtrace-bench-watch-")
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    try:
        if args.only in (None, "live"):
            runs = []
            for rep in range(args.reps):
                for arm in args.arms.split(","):
                    runs.append(live_run(arm, args.requests, args.after, tmp, args.findings))
            print(f"[live] recording small x{args.requests} requests, early-src-free after {args.after}; "
                  f"watch polls every 0.1 s; latency = printed - first 10 ms snapshot in which `check` finds it")
            for arm in args.arms.split(","):
                rs = [r for r in runs if r["arm"] == arm]
                lat = [l for r in rs for _, l, _ in r["latency"] if l is not None]
                first = [r["latency"][0][1] for r in rs if r["latency"] and r["latency"][0][1] is not None]
                st = [s for r in rs for s in r["steps"]]
                print(f"  {arm:5s} first hazard: " + " ".join(f"{x:.2f}" for x in first) + " s"
                      + (f"   all measured: median {statistics.median(lat):.2f} s, max {max(lat):.2f} s (n={len(lat)})"
                         if lat else "   no finding measured"))
                for r in rs:
                    print(f"        run: {r['checks']} re-checks in {r['wall']:.1f} s, {r['reports']} findings printed; "
                          + ", ".join(f"{c} {'-' if l is None else f'{l:.2f}'} s{'' if d else ' (at the end)'}"
                                      for c, l, d in r["latency"]))
                keys = list(dict.fromkeys(k for s in st for k in s))
                print("        per re-check (median / max): " + ", ".join(
                    f"{k} {statistics.median(s[k] for s in st if k in s):.2f} / {max(s[k] for s in st if k in s):.2f} s"
                    for k in keys))
        if args.only in (None, "recheck"):
            recheck_cost(args.requests, args.after, tmp, args.recheck_reps)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
