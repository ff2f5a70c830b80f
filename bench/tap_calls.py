"""What the NIXL tap adds to each posting: the same traced agent pair with its tap in place and
taken out (NIXL's binding called directly), in one process, interleaved, on UCX loopback.

    .venv/bin/python bench/tap_calls.py [--postings 200] [--reps 5] [--descs 48] [--path prepped|initialize]

One agent pair (TracedAgent into a --ring 30s recorder), DRAM regions of --descs 4 KiB pages,
prepped lists on both sides; each posting does what the reference engine's prefill does:
make_prepped_xfer (int32 index arrays), transfer, poll check_xfer_state to DONE (the target's
get_new_notifs as its progress), release, then the target takes its notifications. The arms
differ only in ``agent.agent``: the tap, or the binding it wraps (so the same NIXL objects and
buffers: two different agent pairs differ by up to ~90 us a posting in UCX's own copy, traced
or not). Prints thread CPU per posting, best of --reps, per phase. ``--path initialize``: each posting
builds its descriptor lists (get_xfer_descs of an Nx3 array) and calls initialize_xfer instead, as
SGLang's connector does (its "make" phase is then those two calls).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--postings", type=int, default=200)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--descs", type=int, default=48)
    p.add_argument("--page-bytes", type=int, default=4096,
                   help="bytes a descriptor moves (small: the CPU caches stay warm, as with VRAM pages)")
    p.add_argument("--path", choices=("prepped", "initialize"), default="prepped",
                   help="prepped lists (make_prepped_xfer) or per-posting lists (initialize_xfer)")
    a = p.parse_args(argv)
    import numpy as np
    from kvtrace.tracer.engine.nixlio import make_agent
    from kvtrace.tracer.ring import open_recorder

    K, PB = a.descs, a.page_bytes
    tmp = tempfile.mkdtemp(prefix="kvtrace-tap-")
    rec = open_recorder(os.path.join(tmp, "t.kvtrace"), "tap", ring="30s")
    keep = []

    def pair(traced: bool, tag: str):
        r = rec if traced else None
        src, dst = make_agent(f"src-{tag}", r), make_agent(f"dst-{tag}", r)
        bufs = np.zeros(K * PB, np.uint8), np.zeros(K * PB, np.uint8)
        keep.append(bufs)
        for agent, buf in zip((src, dst), bufs):
            agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM")
        src.add_remote_agent(dst.get_agent_metadata())
        dst.add_remote_agent(src.get_agent_metadata())

        def rows(buf):
            return np.stack([buf.ctypes.data + np.arange(K, dtype=np.int64) * PB, np.full(K, PB),
                             np.zeros(K, np.int64)], 1)
        if a.path == "initialize":   # the rows themselves: each posting makes its lists
            return src, dst, rows(bufs[0]), rows(bufs[1])
        return (src, dst, src.prep_xfer_dlist("NIXL_INIT_AGENT", rows(bufs[0]), "DRAM"),
                src.prep_xfer_dlist(dst.name, rows(bufs[1]), "DRAM"))

    idx = np.arange(K, dtype=np.int32)
    T = time.thread_time

    def run(p, n: int) -> list[float]:
        src, dst, ldl, rdl = p
        ph = [0.0] * 5
        for i in range(n):
            with rec.request(f"r{i}"):
                t0 = T()
                if a.path == "initialize":
                    h = src.initialize_xfer("WRITE", src.get_xfer_descs(ldl, "DRAM"),
                                            src.get_xfer_descs(rdl, "DRAM"), dst.name, b"room=%d" % i)
                else:
                    h = src.make_prepped_xfer("WRITE", ldl, idx, rdl, idx, b"room=%d" % i)
                t1 = T()
                src.transfer(h)
                t2 = T()
                while src.check_xfer_state(h) == "PROC":
                    dst.get_new_notifs()
                t3 = T()
                src.release_xfer_handle(h)
                t4 = T()
            dst.get_new_notifs()
            t5 = T()
            for k, (x, y) in enumerate(((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5))):
                ph[k] += y - x
        return [x / n * 1e6 for x in ph]

    try:
        src, dst, ldl, rdl = pair(True, "t")
        taps = (src.agent, dst.agent)
        arms = {"untapped": (taps[0]._inner, taps[1]._inner), "tapped": taps}

        def arm(name: str, n: int) -> list[float]:
            src.agent, dst.agent = arms[name]
            try:
                return run((src, dst, ldl, rdl), n)
            finally:
                src.agent, dst.agent = taps
        for name in arms:
            arm(name, 50)
        got: dict[str, list[list[float]]] = {k: [] for k in arms}
        for r in range(a.reps):
            for name in (("untapped", "tapped") if r % 2 == 0 else ("tapped", "untapped")):
                got[name].append(arm(name, a.postings))
        names = ("make_prepped_xfer" if a.path == "prepped" else "descs + initialize_xfer", "transfer", "poll to DONE", "release", "notifications")
        best = {k: min(v, key=sum) for k, v in got.items()}
        print(f"per posting ({K} descriptors, {a.path} lists), thread CPU, best of {a.reps} x {a.postings} (by total):")
        for k, v in best.items():
            print(f"  {k:8s} total {sum(v):6.1f} us: " + ", ".join(f"{n} {x:.1f}" for n, x in zip(names, v)))
        print(f"  the tap adds {sum(best['tapped']) - sum(best['untapped']):.1f} us a posting "
              f"(load average {os.getloadavg()[0]:.1f})")
    finally:
        rec.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
