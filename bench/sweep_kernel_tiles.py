"""Tile sweep for the copy and kvh64 kernels: memory traffic per (BLOCK, ITERS, num_warps)
against torch's contiguous device-to-device copy, measured in the same run. Used to pick
``kernels/_launch.py``'s CONFIG and ``tile()``; the row marked "default" is what the
kernels launch with today.

    python bench/sweep_kernel_tiles.py [--size-mb 1024] [--page-kb 64,4]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import Bench, pages_layout  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--page-kb", default="64,4")
    ap.add_argument("--blocks", default="512,1024,2048,4096")
    ap.add_argument("--iters", default="1,2,4,8")
    ap.add_argument("--warps", default="4,8")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        sys.exit("sweep_kernel_tiles: needs a CUDA device")
    from kvtrace.kernels import _launch
    size = args.size_mb << 20
    src = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    bench = Bench("cuda")
    bench.row("torch_d2d", "torch dst.copy_(src), contiguous", lambda: dst.copy_(src), size, 2)
    for page_kb in (int(p) for p in args.page_kb.split(",")):
        so, do, n = pages_layout(size, page_kb << 10)
        words = (page_kb << 10) // 4
        default = _launch.tile(False, words)
        print(f"-- {page_kb} KiB pages; default tile {default}", flush=True)
        for b, i, w in itertools.product(*(map(int, v.split(",")) for v in (args.blocks, args.iters, args.warps))):
            if b * i > 4 * words:
                continue   # tiles far longer than a page only run masked lanes
            cfg = dict(BLOCK=b, ITERS=i, num_warps=w)
            mark = " default" if cfg == default else ""
            bench.row(f"copy_{page_kb}k_{b}_{i}_{w}", f"copy   B={b:<5d} I={i} w={w}{mark}",
                      _launch.plan_copy(src, dst, so, do, n, False, cfg), size, 2)
            bench.row(f"kvh64_{page_kb}k_{b}_{i}_{w}", f"kvh64  B={b:<5d} I={i} w={w}{mark}",
                      _launch.plan_checksum([src], np.zeros(len(n), np.int64), so, n, False, cfg), size, 1)


if __name__ == "__main__":
    main()
