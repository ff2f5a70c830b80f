"""kvh64 on the CPU: the C extension beside the numpy fallback, side by side in one run.

Hashes N MiB of random pages of each size, in place (kvh64_ranges over one buffer, as the
recording hooks do), with each path in turn, interleaved, best of --reps; prints GB/s of
thread CPU time (steady on a loaded machine) and of wall time, and the C/numpy ratio.

    .venv/bin/python bench/bench_kvh64_cpu.py [--sizes 16K,256K,2M] [--mib 64] [--reps 3]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from kvtrace.kernels import checksum


def _size(text: str) -> int:
    text = text.strip().upper()
    return int(float(text.rstrip("KM")) * {"K": 1024, "M": 1 << 20}.get(text[-1], 1))


def _time(fn) -> tuple[float, float]:
    c0, t0 = time.thread_time(), time.perf_counter()
    fn()
    return time.thread_time() - c0, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="16K,256K,2M")
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args(argv)
    if checksum._c_hash_ranges is None:
        print("bench_kvh64_cpu: the C extension is not built (pip install -e . with a C compiler)", file=sys.stderr)
        return 2
    buf = np.random.default_rng(0).integers(0, 256, a.mib << 20, dtype=np.uint8)
    print(f"kvh64 of {a.mib} MiB in pages, best of {a.reps} (load average {os.getloadavg()[0]:.1f})")
    print(f"{'page':>9} {'C GB/s cpu':>11} {'numpy GB/s cpu':>15} {'ratio':>6} {'C GB/s wall':>12} {'numpy GB/s wall':>16}")
    for page in (_size(x) for x in a.sizes.split(",")):
        offs = np.arange(len(buf) // page, dtype=np.int64) * page
        best = {"C": [1e9, 1e9], "numpy": [1e9, 1e9]}
        for _ in range(a.reps):
            for name, mod in (("C", checksum._c_hash_ranges), ("numpy", None)):
                checksum._native = mod   # the path kvh64_ranges takes
                cpu, wall = _time(lambda: checksum.kvh64_ranges(buf, offs, page))
                best[name] = [min(best[name][0], cpu), min(best[name][1], wall)]
        checksum._native = checksum._c_hash_ranges
        gb = len(offs) * page / 1e9
        c, n = best["C"], best["numpy"]
        print(f"{page // 1024:>6} KiB {gb / c[0]:>11.2f} {gb / n[0]:>15.2f} {n[0] / c[0]:>5.1f}x"
              f" {gb / c[1]:>12.2f} {gb / n[1]:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
