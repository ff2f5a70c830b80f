"""Kernel bandwidth, side by side in one run: kvh64 checksum, batched range copy and
provenance fill against torch's device-to-device copy; NIXL VRAM→VRAM (UCX) beside the
copy kernel on the same descriptors.

    python bench/bench_kernels.py [--size-mb 1024] [--page-kb 64] [--json OUT.json]

GB/s counts the bytes each operation covers (copied, hashed, filled) per second: a copy
moves them twice through memory, a checksum once. "kernel" timings launch prepared
kernels (device offsets staged once, as the replay executor does per transfer); "api"
timings are the whole facade call, host staging and result download included.
Needs CUDA (an H200 run: scripts/gpu/run_h200.sh).
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def cuda_time(fn, reps: int = 10, warm: int = 3) -> float:
    """Median seconds of ``fn`` timed with CUDA events."""
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return float(np.median(out))


def wall_time(fn, reps: int = 5, warm: int = 1, sync=lambda: None) -> float:
    for _ in range(warm):
        fn()
    sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def nixl_write(src, dst, so, do, n, reps: int):
    """Seconds per re-post of one prepared WRITE of these ranges between two UCX agents."""
    from nixl._api import nixl_agent, nixl_agent_config
    cfg = nixl_agent_config(backends=["UCX"], enable_prog_thread=False, enable_listen_thread=False)
    a, b = nixl_agent("bench-src", cfg), nixl_agent("bench-dst", cfg)
    a.register_memory([src])
    b.register_memory([dst])
    a.add_remote_agent(b.get_agent_metadata())
    dev = src.device.index or 0
    mk = lambda base, off: a.get_xfer_descs(  # noqa: E731
        np.stack([base + off, n, np.full(len(n), dev)], 1).astype(np.int64), "VRAM")
    h = a.initialize_xfer("WRITE", mk(src.data_ptr(), so), mk(dst.data_ptr(), do), "bench-dst", b"bench")

    def once():
        a.transfer(h)   # NIXL allows re-posting a handle once it is done
        while (st := a.check_xfer_state(h)) == "PROC":
            pass
        if st != "DONE":
            raise RuntimeError(f"NIXL transfer state {st}")
    t = wall_time(once, reps=reps, warm=2)
    a.release_xfer_handle(h)
    return t


def run_cuda(args) -> dict:
    import torch

    from kvtrace.kernels import _launch, checksum_slots, copy_ranges, fill_provenance
    size, page = args.size_mb << 20, args.page_kb << 10
    pages = size // page
    gen = torch.Generator(device="cuda").manual_seed(0)
    src = torch.randint(0, 256, (size,), dtype=torch.uint8, device="cuda", generator=gen)
    dst = torch.empty_like(src)
    rng = np.random.default_rng(0)
    so = np.arange(pages, dtype=np.int64) * page
    do = rng.permutation(pages).astype(np.int64) * page          # scattered, like KV pages
    n = np.full(pages, page, np.int64)
    res = {"device": torch.cuda.get_device_name(), "size_bytes": size, "page_bytes": page, "pages": pages,
           "torch": torch.__version__}
    res["torch_d2d_s"] = cuda_time(lambda: dst.copy_(src))
    copy_k = _launch.plan_copy(src, dst, so, do, n, False)
    res["copy_kernel_s"] = cuda_time(copy_k)
    sync = torch.cuda.synchronize
    res["copy_api_s"] = wall_time(lambda: copy_ranges(src, dst, np.stack([so, do, n], 1)), sync=sync)
    # unaligned: every range 3 bytes shorter and 1 byte off, so the byte path runs
    uk = _launch.plan_copy(src, dst, so + 1, do, n - 3, False)
    res["copy_unaligned_kernel_s"] = cuda_time(uk)
    idx_src = torch.as_tensor(so // page, device="cuda")
    idx_dst = torch.as_tensor(do // page, device="cuda")
    sv, dv = src.view(pages, page), dst.view(pages, page)
    res["torch_index_copy_s"] = cuda_time(lambda: dv.index_copy_(0, idx_dst, sv.index_select(0, idx_src)))
    ck = _launch.plan_checksum([src], np.zeros(pages, np.int64), so, n, False)
    res["checksum_kernel_s"] = cuda_time(ck)
    res["checksum_api_s"] = wall_time(lambda: checksum_slots(src, so, page), sync=sync)
    fill_args = (dst, do, page, "r1", "kv", 3, np.arange(pages))
    res["fill_api_s"] = wall_time(lambda: fill_provenance(*fill_args), sync=sync)
    ok = np.array_equal(checksum_slots(dst, do, page), checksum_slots(dst.cpu(), do, page, backend="cpu"))
    res["fill_checksum_bits_equal_cpu"] = bool(ok)
    copy_k()
    torch.cuda.synchronize()
    res["copy_bits_equal"] = bool(np.array_equal(checksum_slots(dst, do, page), checksum_slots(src, so, page)))
    try:
        res["nixl_write_s"] = nixl_write(src, dst, so, do, n, reps=5)
        big = 1 << 26   # same bytes in 64 MiB descriptors: NIXL's best case
        bs = np.arange(size // big, dtype=np.int64) * big
        res["nixl_write_64mib_desc_s"] = nixl_write(src, dst, bs, bs, np.full(len(bs), big, np.int64), reps=5)
        res["nixl_bits_equal"] = bool(np.array_equal(checksum_slots(dst, bs, big), checksum_slots(src, bs, big)))
    except ImportError as e:
        res["nixl_error"] = f"nixl not importable: {e}"
    return res


def report(res: dict) -> list[str]:
    size = res["size_bytes"]
    gbs = lambda k: size / res[k] / 1e9  # noqa: E731
    base = gbs("torch_d2d_s")
    lines = [f"device: {res['device']}  buffer {size >> 20} MiB  pages {res['pages']} x {res['page_bytes']} B",
             f"{'operation':44s} {'GB/s':>8s} {'vs torch d2d':>12s}"]
    for key, label in [("torch_d2d_s", "torch dst.copy_(src) (contiguous)"),
                       ("torch_index_copy_s", "torch index_select+index_copy (scattered)"),
                       ("copy_kernel_s", "copy_ranges kernel (scattered pages)"),
                       ("copy_api_s", "copy_ranges api call"),
                       ("copy_unaligned_kernel_s", "copy_ranges kernel (unaligned, byte path)"),
                       ("checksum_kernel_s", "kvh64 checksum kernel (bytes hashed)"),
                       ("checksum_api_s", "checksum_slots api call"),
                       ("fill_api_s", "fill_provenance api call"),
                       ("nixl_write_s", "NIXL UCX VRAM->VRAM WRITE, same pages"),
                       ("nixl_write_64mib_desc_s", "NIXL UCX VRAM->VRAM WRITE, 64 MiB descs")]:
        if key in res:
            lines.append(f"{label:44s} {gbs(key):8.1f} {gbs(key) / base:11.0%}")
    for key in ("copy_bits_equal", "fill_checksum_bits_equal_cpu", "nixl_bits_equal", "nixl_error"):
        if key in res:
            lines.append(f"{key}: {res[key]}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--page-kb", type=int, default=64)
    ap.add_argument("--json", help="also write the raw numbers here")
    args = ap.parse_args()
    res = run_cuda(args)
    print("\n".join(report(res)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
