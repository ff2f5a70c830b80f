"""Kernel bandwidth, side by side in one run: kvh64 checksum, batched range copy and
provenance fill against torch's device-to-device copy; NIXL VRAM→VRAM (UCX) beside the
copy kernel on the same descriptors.

    python bench/bench_kernels.py [--size-mb 1024] [--page-kb 64,4] [--nixl-mb 256] [--json OUT]
    python bench/bench_kernels.py --device cpu --size-mb 16 --nixl-mb 16   # the CPU paths

Two bandwidth columns: "covered" counts the bytes an operation is about (copied, hashed,
filled) per second; "traffic" counts what crosses memory (a copy reads and writes each
byte, a checksum only reads, a fill only writes). The ratio to torch's contiguous
``dst.copy_(src)`` is taken on traffic, so a checksum at 100% streams as fast as the best
copy does. "kernel" rows launch prepared kernels (device offsets staged once, as the
replay executor does per transfer); "api" rows time the whole facade call, host staging
and the result download included.

Every row prints as soon as it is measured, so a slow step shows where it is. NIXL rows
post one prepared WRITE between two agents in this process and poll both (the target's
UCX worker must progress too); a post that takes longer than --nixl-timeout is reported,
not waited on. With --device cpu the buffers are DRAM and the kernels are the numpy CPU
backend (what recording uses without a GPU).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


class Bench:
    """Times operations and prints one table row per measurement as it lands."""

    def __init__(self, device: str):
        import torch
        self.torch, self.cuda = torch, device == "cuda"
        self.rows: list[dict] = []
        self.base_traffic: float | None = None
        self.extra: dict = {}

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def seconds(self, fn, reps: int, warm: int, events: bool) -> float:
        """Median seconds per call: CUDA events around device-only work, wall clock else."""
        for _ in range(warm):
            fn()
        self.sync()
        out = []
        for _ in range(reps):
            if events and self.cuda:
                a = self.torch.cuda.Event(enable_timing=True)
                b = self.torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                out.append(a.elapsed_time(b) / 1e3)
            else:
                t = time.perf_counter()
                fn()
                self.sync()
                out.append(time.perf_counter() - t)
        return float(np.median(out))

    def row(self, key: str, label: str, fn, covered: int, passes: int, *, reps: int = 10,
            warm: int = 3, events: bool = True) -> None:
        """Measure ``fn`` (covering ``covered`` bytes, ``passes`` memory passes per byte)."""
        try:
            s = self.seconds(fn, reps, warm, events)
        except Exception as e:  # one failing row must not cost the others
            print(f"{label:46s} failed: {type(e).__name__}: {e}", flush=True)
            self.extra[key + "_error"] = f"{type(e).__name__}: {e}"
            return
        traffic = covered * passes / s / 1e9
        if self.base_traffic is None:
            self.base_traffic = traffic
        r = dict(key=key, label=label, seconds=s, covered_bytes=covered, passes=passes,
                 covered_gbs=covered / s / 1e9, traffic_gbs=traffic, vs_torch_d2d=traffic / self.base_traffic)
        self.rows.append(r)
        print(f"{label:46s} {r['covered_gbs']:9.1f} {traffic:9.1f} {r['vs_torch_d2d']:9.0%}  "
              f"{s * 1e3:9.3f} ms", flush=True)

    def note(self, key: str, value) -> None:
        self.extra[key] = value
        print(f"{key}: {value}", flush=True)


def pages_layout(size: int, page: int, seed: int = 0):
    """Source pages in order, destination pages scattered (a permutation), like KV slots."""
    pages = size // page
    so = np.arange(pages, dtype=np.int64) * page
    do = np.random.default_rng(seed).permutation(pages).astype(np.int64) * page
    return so, do, np.full(pages, page, np.int64)


class NixlPair:
    """Two UCX agents in this process: ``src`` registered on one, ``dst`` on the other."""

    def __init__(self, src, dst, mem: str):
        from nixl._api import nixl_agent, nixl_agent_config
        cfg = nixl_agent_config(backends=["UCX"], enable_prog_thread=False, enable_listen_thread=False)
        self.a, self.b = nixl_agent("bench-src", cfg), nixl_agent("bench-dst", cfg)
        self.a.register_memory([src], mem)
        self.b.register_memory([dst], mem)
        self.a.add_remote_agent(self.b.get_agent_metadata())
        self.src, self.dst, self.mem = src, dst, mem
        self.dev = src.device.index or 0

    def prepare(self, so, do, n):
        mk = lambda base, off: self.a.get_xfer_descs(  # noqa: E731
            np.stack([base + off, n, np.full(len(n), self.dev)], 1).astype(np.int64), self.mem)
        return self.a.initialize_xfer("WRITE", mk(self.src.data_ptr(), so), mk(self.dst.data_ptr(), do),
                                      "bench-dst", b"bench")

    def post(self, handle, timeout: float) -> None:
        """Post (NIXL allows re-posting a handle once it is DONE) and poll both sides to DONE."""
        deadline = time.monotonic() + timeout
        self.a.transfer(handle)
        while (st := self.a.check_xfer_state(handle)) == "PROC":
            self.b.get_new_notifs()     # progresses the target's worker
            if time.monotonic() > deadline:
                raise TimeoutError(f"NIXL WRITE still PROC after {timeout:.0f} s")
        if st != "DONE":
            raise RuntimeError(f"NIXL transfer state {st}")


def run(args) -> Bench:
    import torch

    from kvtrace.kernels import _launch, checksum_slots, copy_ranges, fill_provenance
    dev = args.device
    be = "triton" if dev == "cuda" else "cpu"
    bench = Bench(dev)
    size = args.size_mb << 20
    gen = torch.Generator(device=dev).manual_seed(0)
    src = torch.randint(0, 256, (size,), dtype=torch.uint8, device=dev, generator=gen)
    dst = torch.empty_like(src)
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    bench.note("device", f"{name}, torch {torch.__version__}, buffer {args.size_mb} MiB")
    print(f"{'operation':46s} {'covered':>9s} {'traffic':>9s} {'traffic':>9s}  {'per call':>12s}\n"
          f"{'':46s} {'GB/s':>9s} {'GB/s':>9s} {'vs d2d':>9s}", flush=True)
    reps = dict(reps=10, warm=3) if dev == "cuda" else dict(reps=3, warm=1)
    bench.row("torch_d2d", "torch dst.copy_(src), contiguous", lambda: dst.copy_(src), size, 2, **reps)

    for page_kb in [int(p) for p in args.page_kb.split(",")]:
        page = page_kb << 10
        so, do, n = pages_layout(size, page)
        tag = f"{page_kb} KiB pages x {len(n)}"
        if dev == "cuda":
            sv, dv = src.view(-1, page), dst.view(-1, page)
            i_s, i_d = torch.as_tensor(so // page, device=dev), torch.as_tensor(do // page, device=dev)
            bench.row(f"torch_index_copy_{page_kb}k", f"torch index_select+index_copy_, {tag}",
                      lambda: dv.index_copy_(0, i_d, sv.index_select(0, i_s)), size, 2, **reps)
            copy_k = _launch.plan_copy(src, dst, so, do, n, False)
            bench.row(f"copy_kernel_{page_kb}k", f"copy kernel, {tag}", copy_k, size, 2, **reps)
            bench.row(f"copy_kernel_unaligned_{page_kb}k", "copy kernel, same, 1 B off (byte path)",
                      _launch.plan_copy(src, dst, so + 1, do, n - 3, False), size, 2, **reps)
            ck = _launch.plan_checksum([src], np.zeros(len(n), np.int64), so, n, False)
            bench.row(f"checksum_kernel_{page_kb}k", f"kvh64 checksum kernel, {tag}", ck, size, 1, **reps)
        bench.row(f"copy_api_{page_kb}k", f"copy_ranges api ({be}), {tag}",
                  lambda: copy_ranges(src, dst, np.stack([so, do, n], 1), backend=be), size, 2,
                  events=False, **reps)
        bench.row(f"checksum_api_{page_kb}k", f"checksum_slots api ({be}), {tag}",
                  lambda: checksum_slots(src, so, page, backend=be), size, 1, events=False, **reps)
        bench.row(f"fill_api_{page_kb}k", f"fill_provenance api ({be}), {tag}",
                  lambda: fill_provenance(dst, do, page, "r1", "kv", 3, np.arange(len(n)), backend=be),
                  size, 1, events=False, **reps)
        # bit-identity on the data just produced: the device results against the CPU backend
        # on a sample of pages (the whole buffer through numpy would dominate the run)
        pick = np.random.default_rng(1).choice(len(n), min(64, len(n)), replace=False)
        host = dst.cpu()
        same = np.array_equal(checksum_slots(dst, do[pick], page, backend=be),
                              checksum_slots(host, do[pick], page, backend="cpu"))
        bench.note(f"fill_checksum_equal_cpu_{page_kb}k", bool(same))
        copy_ranges(src, dst, np.stack([so, do, n], 1), backend=be)
        bench.sync()
        bench.note(f"copy_bits_equal_{page_kb}k",
                   bool(np.array_equal(checksum_slots(dst, do, page, backend=be),
                                       checksum_slots(src, so, page, backend=be))))

    if args.nixl_mb:
        nixl_rows(bench, src, dst, args)
    return bench


def nixl_rows(bench: Bench, src, dst, args) -> None:
    """NIXL UCX WRITE beside the copy kernel on the same descriptors."""
    from kvtrace.kernels import _launch, checksum_slots
    try:
        pair = NixlPair(src, dst, "VRAM" if src.is_cuda else "DRAM")
    except ImportError as e:
        bench.note("nixl_error", f"nixl not importable: {e}")
        return
    nbytes = min(args.nixl_mb << 20, src.numel())
    page = int(args.page_kb.split(",")[0]) << 10
    so, do, n = pages_layout(nbytes, page, seed=2)
    big = min(nbytes, 64 << 20)
    bs = np.arange(nbytes // big, dtype=np.int64) * big
    bn = np.full(len(bs), big, np.int64)
    rep = dict(reps=args.nixl_reps, warm=1, events=False)
    for key, label, (s, d, k) in [("nixl_write_pages", f"NIXL UCX WRITE, {page >> 10} KiB pages x {len(n)}",
                                   (so, do, n)),
                                  ("nixl_write_big", f"NIXL UCX WRITE, {big >> 20} MiB descs x {len(bs)}",
                                   (bs, bs, bn))]:
        try:
            h = pair.prepare(s, d, k)
        except Exception as e:
            bench.note(key + "_error", f"{type(e).__name__}: {e}")
            continue
        bench.row(key, label, lambda h=h: pair.post(h, args.nixl_timeout), nbytes, 2, **rep)
        if src.is_cuda:
            bench.row(key.replace("nixl_write", "copy_kernel_same"), "  copy kernel, the same descriptors",
                      _launch.plan_copy(src, dst, s, d, k, False), nbytes, 2)
        pair.a.release_xfer_handle(h)
    # what NIXL delivered last (the big descriptors), checked against the source
    bench.note("nixl_bits_equal", bool(np.array_equal(checksum_slots(dst, bs, big), checksum_slots(src, bs, big))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--size-mb", type=int, default=1024, help="buffer size for the kernel rows")
    ap.add_argument("--page-kb", default="64,4", help="page sizes to run, comma separated")
    ap.add_argument("--nixl-mb", type=int, default=256, help="bytes per NIXL post (0: no NIXL rows)")
    ap.add_argument("--nixl-reps", type=int, default=5)
    ap.add_argument("--nixl-timeout", type=float, default=60.0, help="seconds before a NIXL post counts as hung")
    ap.add_argument("--json", help="also write the raw numbers here")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("bench_kernels: needs torch")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_kernels: no CUDA device here (use --device cpu for the CPU paths)")
    bench = run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": bench.rows, **bench.extra}, f, indent=1)


if __name__ == "__main__":
    main()
