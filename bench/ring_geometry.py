"""What the flight recorder costs SGLang's real NIXL connector against how much a request moves.

    .venv/bin/python bench/ring_geometry.py [--requests 160] [--rounds 2] [--geometries small mla61 mha80]

Runs tests/engines/sglang_pd.py (two processes, DRAM over UCX on this machine; the GPU host
runs the same geometries with VRAM pools: ``bash .gpu/sglang_h200.sh geom``) under
``kvtrace record --ring 30s --hooks sglang:-content`` with ``--paused-waves``: every odd wave
of 8 requests runs unrecorded inside the same processes, so each recorded wave is compared
with its unrecorded neighbours (bench/paused_waves.py). Geometries, in turn each round:

- ``small``: MLA, 2 kv + 2 index-K layers, 64-token pages (what the earlier cost figures used);
- ``mla61``: DeepSeek-V3.2-shaped, 61 MLA kv + 61 index-K layers (~30x the bytes and
  descriptors a request);
- ``mha80``: a 70B-class GQA model at TP 8, one 128-wide KV head a rank, 80 layers: K and V
  regions, 160 descriptors of 16 KiB a page (many small descriptors).

The recorder's cost is mostly per request (the engine hooks) and per posting (the NIXL tap),
the transfer's per byte: the percentage is a property of the geometry, so all three are
printed side by side. Needs scripts/setup_engines.sh (.venv-engines).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from paused_waves import describe, ratios  # noqa: E402

GEOMETRIES = {
    "small": ["--index-k", "tokens"],
    "mla61": ["--index-k", "tokens", "--kv-layers", "61", "--index-layers", "61"],
    "mha80": ["--kv-heads", "1", "--head-dim", "128", "--kv-layers", "80"],
}


def run(geometry: str, requests: int, max_pages: int, tmp: str, tag: str) -> tuple[list[float], float, float]:
    """One recorded run with paused waves: (per-pair ratios, totals ratio, MiB a request)."""
    import json
    engines = os.environ.get("KVTRACE_ENGINES_VENV", os.path.join(ROOT, ".venv-engines"))
    py = os.path.join(engines, "bin", "python")
    report = os.path.join(tmp, f"{tag}.json")
    slots = 8 * max_pages + 16
    cmd = [py, "-m", "kvtrace", "record", "--hooks", "sglang:-content", "--ring", "30s",
           "-o", os.path.join(tmp, f"{tag}.kvtrace"), "--",
           py, os.path.join(ROOT, "tests", "engines", "sglang_pd.py"), "--slots", str(slots),
           "--page-tokens", "64", "--requests", str(requests), "--max-pages", str(max_pages), "--wave", "8",
           "--paused-waves", "--timeout", "300", "--report", report, *GEOMETRIES[geometry]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in (ROOT, os.environ.get("PYTHONPATH")) if x))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
    if r.returncode:
        raise SystemExit(f"ring_geometry: {geometry} run failed (exit {r.returncode}): {r.stderr.strip()[-800:]}")
    with open(report + ".prefill") as f:
        timing = json.load(f)["timing"]
    pairs, whole = ratios(timing, skip=2)
    shutil.rmtree(os.path.join(tmp, f"{tag}.kvtrace"), ignore_errors=True)
    return pairs, whole, timing["bytes"] / requests / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=160)
    p.add_argument("--max-pages", type=int, default=16, help="pages a request at most (DRAM: both sides' pools "
                                                              "are host memory here)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--geometries", nargs="+", default=list(GEOMETRIES), choices=list(GEOMETRIES))
    a = p.parse_args(argv)
    load0, t0 = os.getloadavg(), time.time()
    got: dict[str, list] = {g: [[], [], 0.0] for g in a.geometries}
    with tempfile.TemporaryDirectory(prefix="kvtrace-geom-") as tmp:
        for r in range(a.rounds):
            for g in a.geometries:
                pairs, whole, mib = run(g, a.requests, a.max_pages, tmp, f"{g}-{r}")
                got[g][0] += pairs
                got[g][1].append(whole)
                got[g][2] = mib
    print(f"SGLang's NIXL connector (DRAM over UCX), ring 30s without page checksums, paused waves of 8, "
          f"{a.requests} requests x {a.rounds} round(s), up to {a.max_pages} pages a request")
    for g, (pairs, wholes, mib) in got.items():
        print(f"  {g:6s} {mib:8.1f} MiB a request: {describe(pairs)}; totals "
              + " ".join(f"{100 * (w - 1):+.1f}%" for w in wholes))
    load1 = os.getloadavg()
    print(f"  ({time.time() - t0:.0f} s; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
