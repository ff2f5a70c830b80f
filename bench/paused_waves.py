"""What recording costs SGLang's transfer throughput, from runs of tests/engines/sglang_pd.py
with ``--paused-waves`` under ``kvtrace record``: every odd wave runs unrecorded in the same
processes (kvtrace's NIXL tap taken out, the hooks given no recorder), so recorded and
unrecorded waves share the NIXL agents, connections and buffers, and the run-to-run spread
of separate processes (±25 % on one GPU host) drops out.

    python bench/paused_waves.py REPORT.json.prefill [...] [--skip 2]

Each REPORT is the prefill side's report (``--report R`` writes ``R.prefill``). A wave's
throughput is its bytes over its busy time (queueing the chunks until SGLang says Success).
Where the report says the waves are twins (``timing.wave_twins``: waves 2k and 2k+1 move
requests of the same shapes, one recorded, which one first alternating), each pair's
recorded wave is compared with its unrecorded twin: the same bytes in the same descriptors,
so the spread of request sizes between waves drops out. Older reports: each unrecorded wave
is compared with the mean of the recorded waves on either side of it (which cancels a
drift over the run and the order within a pair). The first ``--skip``
waves (connections, first-touch costs) are left out. Prints, per report and pooled: the
median and quartiles of recorded / unrecorded throughput, its geometric mean with a 95 %
interval (mean of the log ratios +- 1.96 standard errors: the pairs are independent waves, and
the interval says whether a cost of 2 % is shown or only not excluded), and the ratio of
summed bytes over summed busy time. No third-party imports (it runs on the GPU host's bare Python).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys


def ratios(timing: dict, skip: int) -> tuple[list[float], float]:
    """(per pair: the recorded throughput / the unrecorded one), and the ratio of the
    recorded waves' total throughput to the unrecorded ones' (waves before ``skip`` left out)."""
    rec = timing.get("wave_recorded")
    if not rec or all(rec):
        raise ValueError("no unrecorded wave: run sglang_pd.py with --paused-waves under kvtrace record")
    thr = [b / s if s > 0 else None for b, s in zip(timing["wave_bytes"], timing["wave_busy_s"])]
    out = []
    if timing.get("wave_twins"):
        # waves 2k and 2k+1 moved the same request shapes, one recorded: compare the twins
        for w in range(0, len(thr) - 1, 2):
            if w < skip or rec[w] == rec[w + 1] or None in (thr[w], thr[w + 1]):
                continue
            r, u = (w, w + 1) if rec[w] else (w + 1, w)
            out.append(thr[r] / thr[u])
        return out, _totals(timing, rec, skip)
    for w in range(max(skip, 1), len(thr) - 1):
        if rec[w] or not (rec[w - 1] and rec[w + 1]) or None in (thr[w - 1], thr[w], thr[w + 1]):
            continue
        out.append((thr[w - 1] + thr[w + 1]) / 2 / thr[w])
    return out, _totals(timing, rec, skip)


def _totals(timing: dict, rec: list, skip: int) -> float:
    tot = {True: [0, 0.0], False: [0, 0.0]}
    for w, (b, s) in enumerate(zip(timing["wave_bytes"], timing["wave_busy_s"])):
        if w >= skip:
            tot[bool(rec[w])][0] += b
            tot[bool(rec[w])][1] += s
    return (tot[True][0] / tot[True][1]) / (tot[False][0] / tot[False][1]) if tot[False][1] and tot[True][1] else float("nan")


def describe(r: list[float]) -> str:
    if not r:
        return "no wave pairs"
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
    out = (f"recorded/unrecorded throughput median {statistics.median(r):.4f} "
           f"(quartiles {q[0]:.4f}-{q[2]:.4f}, n={len(r)}) = {100 * (statistics.median(r) - 1):+.2f}%")
    if len(r) > 2:
        logs = [math.log(x) for x in r]
        m, se = statistics.mean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
        pct = lambda v: 100 * (math.exp(v) - 1)  # noqa: E731
        out += f"; geometric mean {pct(m):+.2f}% (95% interval {pct(m - 1.96 * se):+.2f}% to {pct(m + 1.96 * se):+.2f}%)"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", help="prefill reports (REPORT.prefill) of --paused-waves runs")
    p.add_argument("--skip", type=int, default=2, help="leading waves left out (default 2)")
    a = p.parse_args(argv)
    pooled = []
    for path in a.reports:
        try:
            with open(path) as f:
                timing = json.load(f)["timing"]
            r, whole = ratios(timing, a.skip)
        except (OSError, ValueError, KeyError) as e:
            print(f"paused_waves: {path}: {e}", file=sys.stderr)
            return 2
        pooled += r
        print(f"{path}: {describe(r)}; totals {whole:.4f} ({100 * (whole - 1):+.2f}%)")
    if len(a.reports) > 1:
        print(f"pooled: {describe(pooled)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
