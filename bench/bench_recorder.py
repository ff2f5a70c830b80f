"""Recorder ingest benchmark (issue 2): single events/s through the public per-event API
and descriptor rows/s through the array path, on one core, flushes included.

    .venv/bin/python bench/bench_recorder.py [--events 1000000] [--descs 4000000]

Targets: >= 0.5M events/s, >= 2M descriptor rows/s. Prints both next to a baseline of
writing prepared Arrow batches directly (the ceiling), measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from kvtrace.tracer.recorder import Recorder
from kvtrace.tracer.schema import EVENTS


def bench_events(n: int, d: str) -> float:
    rec = Recorder(os.path.join(d, "ev.kvtrace"), "main")
    ev = rec.event
    slots = [1, 2, 3]
    t0 = time.perf_counter()
    for i in range(n):
        ev("alloc", "decode", "req", pool="kv", slots=slots, pages=slots)
    rec.close()
    return n / (time.perf_counter() - t0)


def bench_descs(n: int, d: str, per_post: int = 512) -> float:
    rec = Recorder(os.path.join(d, "ds.kvtrace"), "main")
    src = np.arange(per_post, dtype=np.uint64) * 4096
    dst = src + np.uint64(1 << 30)
    idx = np.arange(per_post, dtype=np.int64)
    t0 = time.perf_counter()
    for x in range(n // per_post):
        rec.descs_array(x, "WRITE", "prefill", "decode", src, dst, 4096, src_dlist=0, src_idx=idx,
                        dst_dlist=1, dst_idx=idx)
    rec.close()
    return (n // per_post) * per_post / (time.perf_counter() - t0)


def bench_raw_batches(n: int, d: str) -> float:
    """Ceiling: prepared 64k-row batches written straight to an IPC stream."""
    rows = 65536
    cols = [pa.nulls(rows, f.type) if f.name not in ("seq",) else pa.array(np.arange(rows)) for f in EVENTS]
    batch = pa.RecordBatch.from_arrays(cols, schema=EVENTS)
    t0 = time.perf_counter()
    with pa.OSFile(os.path.join(d, "raw.arrows"), "wb") as sink, pa.ipc.new_stream(sink, EVENTS) as w:
        for _ in range(max(1, n // rows)):
            w.write_batch(batch)
    return max(1, n // rows) * rows / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--descs", type=int, default=4_000_000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="kvtrace-bench-")
    try:
        e = bench_events(a.events, d)
        s = bench_descs(a.descs, d)
        raw = bench_raw_batches(a.events, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(f"per-event API     : {e/1e6:6.2f} M events/s   (target >= 0.5)  {'OK' if e >= 5e5 else 'BELOW TARGET'}")
    print(f"descriptor arrays : {s/1e6:6.2f} M rows/s     (target >= 2.0)  {'OK' if s >= 2e6 else 'BELOW TARGET'}")
    print(f"raw batch ceiling : {raw/1e6:6.2f} M rows/s     (prepared 64k batches, same run)")
    print(f"per-event / ceiling = {e/raw:.3f}")


if __name__ == "__main__":
    main()
