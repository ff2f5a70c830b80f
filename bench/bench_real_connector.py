"""Recording cost on SGLang's real NIXL connector: the same transfers with and without kvtrace.

Runs tests/engines/sglang_pd.py (SGLang 0.5.21's connector, prefill and decode as two
processes over NIXL/UCX on DRAM, index-K sized by tokens: a clean transfer) once per
(page size, mode), the modes interleaved per size (order alternating), all in one run:

  plain     the driver alone
  traced    kvtrace record --hooks sglang (NIXL calls + layouts, pages, checksums, messages)
  no-sums   kvtrace record --hooks sglang:-content (everything but the page checksums)

Prints, per page size (bytes of one kv page of one layer), the transfer throughput
(bytes of all pages and layers / time from the first chunk queued to the last Success,
per wave of requests, summed) and the added median latency per request (first chunk queued
to Success, prefill side). Target: traced ≥ 95% of plain throughput from 256 KiB pages on.

    .venv/bin/python bench/bench_real_connector.py [--sizes 16K,64K,256K,1M,2M] [--requests 24]

Needs .venv-engines (scripts/setup_engines.sh). Results: bench/results/real_connector.{txt,json}.
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
VENV = os.environ.get("KVTRACE_ENGINES_VENV") or os.path.join(ROOT, ".venv-engines")
PY = os.path.join(VENV, "bin", "python")
DRIVER = os.path.join(ROOT, "tests", "engines", "sglang_pd.py")
KV_TOKEN_BYTES = 1152
MODES = {"plain": None, "traced": "sglang", "no-sums": "sglang:-content"}


def size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * mult)


def run_once(tmp: str, page_bytes: int, mode: str, a) -> dict:
    tokens = max(1, page_bytes // KV_TOKEN_BYTES)
    rep = os.path.join(tmp, f"{mode}-{page_bytes}.json")
    prog = [PY, DRIVER, "--index-k", "tokens", "--page-tokens", str(tokens), "--slots", str(a.slots),
            "--requests", str(a.requests), "--max-pages", str(a.max_pages), "--wave", str(a.wave),
            "--report", rep]
    hooks = MODES[mode]
    cmd = prog if hooks is None else [PY, "-m", "kvtrace", "record", "--hooks", hooks, "--force",
                                      "-o", os.path.join(tmp, f"{mode}-{page_bytes}.kvtrace"), "--"] + prog
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, timeout=900)
    if p.returncode != 0 or not os.path.exists(rep + ".prefill"):
        raise SystemExit(f"{mode} {page_bytes}: driver failed (rc {p.returncode}): {p.stderr[-1500:]}")
    with open(rep + ".prefill") as f:
        t = json.load(f)["timing"]
    return {"page_bytes": tokens * KV_TOKEN_BYTES, "mode": mode, "bytes": t["bytes"], "busy_s": t["busy_s"],
            "gbps": t["bytes"] / t["busy_s"] / 1e9, "lat_ms": statistics.median(t["latency_s"]) * 1e3}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="16K,64K,256K,1M,2M")
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--max-pages", type=int, default=8)
    p.add_argument("--wave", type=int, default=4)
    p.add_argument("--slots", type=int, default=48)
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "real_connector"))
    a = p.parse_args(argv)
    if not os.path.exists(PY):
        print(f"bench_real_connector: {PY} missing: run scripts/setup_engines.sh", file=sys.stderr)
        return 2
    rows = []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kvtrace-bench-") as tmp:
        for i, s in enumerate(size(x) for x in a.sizes.split(",")):
            order = list(MODES) if i % 2 == 0 else list(reversed(MODES))
            for mode in order:
                r = run_once(tmp, s, mode, a)
                rows.append(r)
                print(f"  {mode:>8} page {r['page_bytes']:>8} B: {r['gbps']:.3f} GB/s, {r['lat_ms']:.1f} ms/request",
                      file=sys.stderr, flush=True)
    lines = ["SGLang 0.5.21 NIXL connector, DRAM over UCX, two processes, "
             f"{a.requests} requests x 2..{a.max_pages} pages, {a.wave} in flight; "
             "kv 2 layers + index-K 2 layers per page",
             f"{'page':>9} {'plain GB/s':>11} {'traced GB/s':>12} {'ratio':>6} {'no-sums GB/s':>13} {'ratio':>6}"
             f" {'plain ms':>9} {'+traced ms':>11} {'+no-sums ms':>12}"]
    by = {(r["page_bytes"], r["mode"]): r for r in rows}
    for pb in sorted({r["page_bytes"] for r in rows}):
        pl, tr, ns = by[(pb, "plain")], by[(pb, "traced")], by[(pb, "no-sums")]
        lines.append(f"{_kib(pb):>9} {pl['gbps']:>11.3f} {tr['gbps']:>12.3f} {tr['gbps'] / pl['gbps']:>6.2f}"
                     f" {ns['gbps']:>13.3f} {ns['gbps'] / pl['gbps']:>6.2f} {pl['lat_ms']:>9.1f}"
                     f" {tr['lat_ms'] - pl['lat_ms']:>+11.1f} {ns['lat_ms'] - pl['lat_ms']:>+12.1f}")
    lines.append(f"(one run per cell, modes interleaved; {time.time() - t0:.0f} s in all)")
    print("\n".join(lines))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(a.out + ".json", "w") as f:
        json.dump({"args": vars(a), "rows": rows}, f, indent=1)
    return 0


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


if __name__ == "__main__":
    sys.exit(main())
