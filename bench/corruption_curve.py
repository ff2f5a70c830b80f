"""Corruption rate of the `uniform-slot-count` bug (or ``--bug``) vs concurrency, fp8 vs bf16.

Runs the reference engine (real NIXL, in-process, recording off -- the engine's own
verifier counts the corruption) on the production workload at several concurrencies,
with the bug injected, for three pool geometries:

- fp8-bytes: the production preset's geometry (SGLang's indexer pool): index_k bytes
  for the token budget at the fp8 layout; fp8 has kv's slot count, bf16 about half.
- tokens/equal-pages: pools sized from one token budget and kv and index_k share a
  64-token page, so both have the same slot count in either dtype.
- bytes: index_k gets as many bytes per layer as kv (the "same byte size"
  hypothesis); its slot count then depends on its bytes per token, i.e. on the dtype.
- tokens/index_k-page-32: index_k on its own 32-token page, twice kv's slot count.

Each point also runs the same workload without the bug (the clean twin) and reports
its corrupted pages, which must be 0. Nothing here is tuned toward any target rate.

    .venv/bin/python bench/corruption_curve.py [--concurrency 1,8,16,32,64,80]
"""
from __future__ import annotations

import argparse
import os
import time

GEOMETRIES = {
    "fp8-bytes": {"index_k_sizing": "fp8-bytes"},
    "tokens/equal-pages": {"index_k_sizing": "tokens"},
    "bytes": {"index_k_sizing": "bytes"},
    "tokens/index_k-page-32": {"index_k_page_tokens": 32},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="production")
    ap.add_argument("--concurrency", default="1,8,16,32,64,80")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--bug", default="uniform-slot-count",
                    help="bug to inject; other bugs run on the presets' geometry only")
    args = ap.parse_args()
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    from kvtrace.tracer.engine.geometry import side_pools
    from kvtrace.tracer.engine.runner import run_inprocess
    from kvtrace.tracer.engine.workload import load
    concs = [int(c) for c in args.concurrency.split(",")]
    t_all = time.perf_counter()
    print(f"{args.bug} corruption, workload {args.workload}; pages = (pool, layer, slot) reads "
          "verified by the engine; twin = same run without the bug")
    geometries = GEOMETRIES if args.bug == "uniform-slot-count" else {"preset": {}}
    for gname, over in geometries.items():
        print(f"\n== geometry {gname}")
        for ik in ("fp8", "bf16"):
            wl = load(args.workload, index_k=ik, requests=args.requests)
            wl.geometry.update(over)
            d = {p.name: p for p in side_pools(wl, "decode")}
            print(f"  index_k {ik}: decode slots kv {d['kv'].num_slots} index_k {d['index_k'].num_slots} "
                  f"(item_len kv {d['kv'].item_len} B, index_k {d['index_k'].item_len} B)")
            print("    conc  corrupted pages          corrupted requests   twin  failed  attribution")
            for c in concs:
                wl.concurrency = c
                s = run_inprocess(wl, [args.bug])
                twin = run_inprocess(wl, [])
                pr = s["corrupted_pages"] / max(1, s["pages_read"])
                rr = s["corrupted_requests"] / max(1, s["requests_read"])
                att = ", ".join(f"{k}: {v}" for k, v in sorted(s["attribution"].items()))
                print(f"    {c:4d}  {s['corrupted_pages']:5d}/{s['pages_read']:<6d} {pr:6.1%}   "
                      f"{s['corrupted_requests']:4d}/{s['requests_read']:<4d} {rr:6.1%}   "
                      f"{twin['corrupted_pages']:4d}  {s['failed']:5d}   {att}", flush=True)
    print(f"\n({time.perf_counter() - t_all:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
