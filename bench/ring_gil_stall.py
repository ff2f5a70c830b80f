"""How long an engine thread waits for the GIL while kvtrace's flush thread works: a probe
thread sleeps 1 ms in a loop and measures how late it wakes, while a producer thread records
a request's events at a steady rate (what SGLang's scheduler and transfer threads do under
``kvtrace record``), with no recorder, a file recorder and a ring.

    .venv/bin/python bench/ring_gil_stall.py [--seconds 6] [--rate 400]

A transfer worker that wakes late posts late: in a pipeline of short transfers that delay is
throughput, even when the flush thread's CPU share is small. Prints per arm: the probe's
wake-up delay (median, p99, max) and the number of wake-ups later than 2 and 5 ms.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time


def _produce(rec, stop: threading.Event, rate: float) -> None:
    """One request every 1/rate s: start, allocs of 2 x 48 slots, a posting's descriptors,
    its post and done, the frees, done."""
    import numpy as np

    from kvtrace.tracer.schema import EventKind as K
    sl, pages = list(range(48)), list(range(48))
    addr = np.arange(96, dtype=np.uint64) * np.uint64(4096)
    i = 0
    next_t = time.perf_counter()
    while not stop.is_set():
        if rec is not None:
            r = str(i)
            rec.event(K.REQ_START, "prefill", r)
            rec.allocs("prefill", r, [(p, [(s + i) % 512 for s in sl], pages) for p in ("kv0", "kv1")])
            x = rec.new_xfer_id()
            rec.descs_array(x, "WRITE", "prefill", "decode", addr, addr + (1 << 20), 4096)
            rec.event(K.XFER_POST, "prefill", r, xfer=x, peer="decode", nbytes=96 * 4096)
            rec.event(K.XFER_DONE, "prefill", r, xfer=x)
            rec.frees("prefill", r, [(p, [(s + i) % 512 for s in sl]) for p in ("kv0", "kv1")], reason="finish")
            rec.event(K.REQ_DONE, "prefill", r)
        i += 1
        next_t += 1 / rate
        time.sleep(max(0.0, next_t - time.perf_counter()))


def _arm(kind: str, seconds: float, rate: float, tmp: str) -> list[float]:
    from kvtrace.tracer.ring import open_recorder
    rec = None
    if kind != "none":
        rec = open_recorder(os.path.join(tmp, f"{kind}.kvtrace"), "prefill", "30s" if kind == "ring" else None)
    stop = threading.Event()
    prod = threading.Thread(target=_produce, args=(rec, stop, rate), daemon=True)
    prod.start()
    late = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        time.sleep(0.001)
        late.append((time.perf_counter() - t0 - 0.001) * 1e3)
    stop.set()
    prod.join()
    if rec is not None:
        rec.close()
    return late


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--rate", type=float, default=400.0, help="requests per second recorded")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="kvtrace-stall-")
    try:
        print(f"probe: 1 ms sleeps; producer: {a.rate:.0f} requests/s (8 events, 192 slot operations, 96 descriptors each)")
        for r in range(a.rounds):
            for kind in ("none", "file", "ring"):
                late = sorted(_arm(kind, a.seconds, a.rate, tmp))
                q = statistics.quantiles(late, n=100)
                print(f"  round {r + 1} {kind:5s} wake-up delay ms: median {statistics.median(late):.3f}  "
                      f"p99 {q[98]:.3f}  max {late[-1]:.2f}  >2 ms {sum(x > 2 for x in late)}  "
                      f">5 ms {sum(x > 5 for x in late)}  (of {len(late)})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
