"""How long a producer hook holds the engine's thread when the pages are in VRAM.

``record_writes`` (what SGLang's ``send()`` and vLLM's ``request_finished`` hooks call) on
VRAM regions, two ways, alternating in one process: the hash inside the hook
(``KVTRACE_SYNC_CHECKSUMS=1``: launch, wait, copy back) and queued (the default: the kernel
and the copy of its sums queued on the stream, the recorder's hashing thread waits). Each
with the stream idle and with GPU work already queued before the hook (``torch.cuda._sleep``,
standing in for the forward pass a real engine has in flight).

    python bench/bench_vram_hook.py [--reps 30] [--busy-ms 20]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


class Region:
    """What the integrations know of a registered region."""

    def __init__(self, pool, layer, buf, item, slots):
        self.pool, self.layer, self.buf = pool, layer, buf
        self.ptr, self.item, self.slots, self.mem, self.device = buf.data_ptr(), item, slots, "VRAM", buf.device.index


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--busy-ms", type=float, default=20.0, help="GPU work queued before a busy hook")
    ap.add_argument("--item", type=int, default=64 << 10, help="bytes per page")
    ap.add_argument("--slots", type=int, default=512)
    ap.add_argument("--pages", type=int, default=48, help="pages per hook call")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: this benchmark times GPU hashing", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark times GPU hashing", file=sys.stderr)
        return 2
    from kvtrace.tracer import Recorder
    from kvtrace.tracer.integrations._memory import ENV_SYNC, record_writes
    regs = [Region(p, layer, torch.randint(0, 256, (a.item * a.slots,), dtype=torch.uint8, device="cuda"),
                   a.item, a.slots) for p in ("kv", "index_k") for layer in range(2)]
    slots = list(range(0, a.slots, max(1, a.slots // a.pages)))[:a.pages]
    # cycles for --busy-ms: torch.cuda._sleep spins a clock count; calibrate it once
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    cycles = int(10_000_000 * a.busy_ms / start.elapsed_time(end))
    tmp = tempfile.mkdtemp(prefix="kvtrace-vram-hook-")
    rec = Recorder(os.path.join(tmp, "h.kvtrace"), "prefill")
    hook: dict[tuple[str, str], list[float]] = {}
    for rep in range(a.reps + 1):   # rep 0 warms both ways (kernel compile, pinned memory)
        for how in (("hook", "queued") if rep % 2 else ("queued", "hook")):
            os.environ[ENV_SYNC] = "1" if how == "hook" else "0"
            for busy in ("idle", "busy"):
                torch.cuda.synchronize()
                if busy == "busy":
                    torch.cuda._sleep(cycles)
                t0 = time.perf_counter()
                record_writes(rec, "prefill", f"r{rep}", regs, slots, list(range(len(slots))))
                dt = time.perf_counter() - t0
                torch.cuda.synchronize()
                rec.wait_hashes()
                if rep:
                    hook.setdefault((how, busy), []).append(dt * 1e3)
    rec.close()
    mib = len(slots) * a.item * len(regs) / 2**20
    print(f"record_writes on VRAM: {len(regs)} regions x {len(slots)} pages of {a.item >> 10} KiB ({mib:.1f} MiB) per call, "
          f"{a.reps} alternating reps; busy = {a.busy_ms:.0f} ms of GPU work queued before the hook")
    print(f"{'hash':8s} {'stream':6s} {'hook ms median':>15s} {'p90':>8s}")
    for (how, busy), v in sorted(hook.items()):
        v = sorted(v)
        print(f"{how:8s} {busy:6s} {statistics.median(v):15.3f} {v[int(0.9 * (len(v) - 1))]:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
