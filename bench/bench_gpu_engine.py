"""Recording cost on the GPU engine (pools in VRAM), side by side in one run.

1. Engine throughput, recording off vs on (and on without checksums), and the flight
   recorder (``--ring 30s``, with and without checksums), arms interleaved round-robin (the
   order rotating each rep) on the same workload and seed, ``device="cuda"`` (``--device cpu``: a smoke run).
2. µs per intercepted NIXL call on VRAM memory: plain ``nixl_agent`` vs ``TracedAgent``,
   alternating rounds (bench_agent.py's operations, with the buffers in VRAM).

    python bench/bench_gpu_engine.py [--workload production] [--reps 3] [--rounds 9] [--skip-per-call]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_agent  # noqa: E402  (its operations, re-used on VRAM buffers)


class VramPair(bench_agent.Pair):
    """bench_agent's agent pair with both buffers in VRAM, registered as VRAM."""

    def __init__(self, make, tag):
        import torch
        from nixl._api import nixl_agent_config
        cfg = nixl_agent_config(backends=["UCX"], enable_prog_thread=False)
        self.a, self.b = make(f"GA{tag}", cfg), make(f"GB{tag}", cfg)
        n = 1024 * bench_agent.PAGE
        self.src = torch.ones(n, dtype=torch.uint8, device="cuda")
        self.dst = torch.zeros(n, dtype=torch.uint8, device="cuda")
        self.dev = self.src.device.index or 0
        self.a.register_memory([self.src])
        self.b.register_memory([self.dst])
        self.a.add_remote_agent(self.b.get_agent_metadata())
        self.peer = self.b.name
        self.rows_src = self._rows(self.src)
        self.loc = self.a.prep_xfer_dlist("", self.rows_src, "VRAM")
        self.rem = self.a.prep_xfer_dlist(self.peer, self._rows(self.dst), "VRAM")
        self.h16 = self.a.make_prepped_xfer("WRITE", self.loc, list(range(16)), self.rem, list(range(16)), b"1_kv_0_1_0")
        self.h256 = self.a.make_prepped_xfer("WRITE", self.loc, list(range(256)), self.rem,
                                             list(range(256, 512)), b"2_kv_0_1_0")
        self.ld = self.a.get_xfer_descs(self.rows_src[:16], "VRAM")
        self.rd = self.a.get_xfer_descs(self._rows(self.dst)[:16], "VRAM")
        self.a.transfer(self.h16)
        self.wait(self.h16)

    def _rows(self, buf):
        base = buf.data_ptr()
        return np.array([[base + i * bench_agent.PAGE, bench_agent.PAGE, self.dev] for i in range(1024)],
                        dtype=np.uint64)

    def op_prep_1024(self, clk):
        t = clk()
        self.a.release_dlist_handle(self.a.prep_xfer_dlist("", self.rows_src, "VRAM"))
        return clk() - t

    def op_register_deregister(self, clk):
        t = clk()
        self.a.deregister_memory(self.a.register_memory([self.src[:bench_agent.PAGE]]))
        return clk() - t


def engine_ab(workload: str, reps: int, device: str = "cuda") -> list[str]:
    import shutil

    from kvtrace.tracer.engine.runner import run_inprocess
    from kvtrace.tracer.engine.workload import load
    wl = load(workload)
    tmp = tempfile.mkdtemp(prefix="kvtrace-gpu-bench-")
    # arm: (recorded, checksums, ring spec)
    arms = {"off": (False, False, None), "on": (True, True, None), "on-nocsum": (True, False, None),
            "ring": (True, True, "30s"), "ring-nocsum": (True, False, "30s")}
    times: dict[str, list[float]] = {a: [] for a in arms}
    info = {}
    info["warm"] = run_inprocess(wl, [], None, device=device)     # imports, UCX, CUDA context
    for arm, (rec, csum, ring) in arms.items():                   # each arm's first-use costs
        out = os.path.join(tmp, f"warm-{arm}.kvtrace") if rec else None
        run_inprocess(wl, [], out, device=device, checksums=csum, ring=ring)
        if out:
            shutil.rmtree(out, ignore_errors=True)
    names = list(arms)
    for rep in range(reps):
        for arm in names[rep % len(names):] + names[:rep % len(names)]:
            rec, csum, ring = arms[arm]
            out = os.path.join(tmp, f"{arm}-{rep}.kvtrace") if rec else None
            t0 = time.perf_counter()
            info[arm] = run_inprocess(wl, [], out, device=device, checksums=csum, ring=ring)
            times[arm].append(time.perf_counter() - t0)
            if out:
                shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    s = info["off"]
    med = {a: statistics.median(v) for a, v in times.items()}
    lines = [f"engine on {device}, workload {wl.name}: {s['requests']} requests, {s['steps']} steps, "
             f"{s['pages_read']} pages read, corrupted pages {s['corrupted_pages']}; {reps} reps per arm, interleaved"]
    for a, v in times.items():
        lines.append(f"  {a:10s} median {med[a]:6.2f} s  ({s['requests'] / med[a]:6.1f} req/s)  runs "
                     + " ".join(f"{x:.2f}" for x in v))
    lines.append(f"overhead on vs off:        {med['on'] / med['off'] - 1:+.1%}   (target < 5%)")
    for a in ("on-nocsum", "ring", "ring-nocsum"):
        lines.append(f"overhead {a + ' vs off:':20s} {med[a] / med['off'] - 1:+.1%}")
    return lines


def per_call(rounds: int, iters: int) -> list[str]:
    from nixl._api import nixl_agent

    from kvtrace.tracer import Recorder
    from kvtrace.tracer.agent import TracedAgent
    tmp = tempfile.mkdtemp(prefix="bench_gpu_agent_")
    rec = Recorder(os.path.join(tmp, "b.kvtrace"), "bench")
    plain = VramPair(lambda n, c: nixl_agent(n, c), "p")
    traced = VramPair(lambda n, c: TracedAgent(n, c, recorder=rec, request_tags="sglang"), "t")
    lines = [f"µs per NIXL call on VRAM buffers, {rounds} alternating rounds x {iters} calls, medians (wall)",
             f"{'operation':36s} {'nixl µs':>9s} {'traced':>8s} {'+µs':>8s}"]
    for label, name, div in bench_agent.OPS:
        n = max(1, iters // div)
        res = {"p": [], "t": []}
        for r in range(rounds):
            order = ((plain, "p"), (traced, "t")) if r % 2 == 0 else ((traced, "t"), (plain, "p"))
            for pair, k in order:
                res[k].append(bench_agent.time_op(pair, name, n, time.perf_counter_ns))
        p, t = statistics.median(res["p"]), statistics.median(res["t"])
        lines.append(f"{label:36s} {p:9.2f} {t:8.2f} {t - p:8.2f}")
    rec.close()
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="production")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--skip-engine", action="store_true")
    ap.add_argument("--skip-per-call", action="store_true")
    ap.add_argument("--device", default="cuda", help="the engine's pools (cpu: a smoke run of the engine arms)")
    args = ap.parse_args()
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    if not args.skip_per_call:
        for line in per_call(args.rounds, args.iters):
            print(line, flush=True)
    if not args.skip_engine:
        for line in engine_ab(args.workload, args.reps, args.device):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
