"""Where the ring's flush thread holds the GIL: a probe thread wakes every 0.2 ms with the
interpreter's switch interval lowered to 0.1 ms (so Python code hands the GIL over within
0.1 ms and what still delays the probe is one long call holding it), while a producer
records requests at a steady rate into a ring, and a second process (the other shard of
the session) records the same requests into its own ring, so the live-request exchange
reads a real live.json. The flush's steps are timed on the flush thread; each probe
wake-up later than ``--late`` ms is charged to the innermost step running then.

    .venv/bin/python bench/ring_gil_holds.py [--seconds 6] [--rate 400]

Prints per step: calls, total ms per flush, the longest single call, and the late
wake-ups charged to it; and the probe's wake-up delays overall.
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_gil_stall import _produce   # noqa: E402  (the same producer)

_SPANS: list = []       # (name, depth, t0, t1) on the flush thread
_depth = threading.local()


def _wrap(owner, attr: str, name: str) -> None:
    fn = getattr(owner, attr, None)
    if fn is None:      # another tree's kvtrace (--old) names its steps differently
        return

    def timed(*a, **k):
        d = getattr(_depth, "d", 0)
        _depth.d = d + 1
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            _SPANS.append((name, d, t0, time.perf_counter()))
            _depth.d = d
    setattr(owner, attr, timed)


def _instrument() -> None:
    from kvtrace.tracer import recorder, ring, ring_dump, ring_store
    _wrap(ring.RingRecorder, "flush", "flush")
    _wrap(recorder.Recorder, "_convert", "convert")
    _wrap(recorder.Recorder, "_in_order", "in_order")
    _wrap(ring_store.RingStore, "_ingest_events", "book")
    _wrap(ring_store.RingStore, "_ingest_descs", "ingest_descs")
    _wrap(ring_store.RingStore, "evict", "evict")
    _wrap(ring_store.RingStore, "live_requests", "live_requests")
    _wrap(ring_store.RingStore, "set_remote", "set_remote")
    _wrap(ring_store.RingStore, "depends", "depends")
    _wrap(ring_dump, "publish_live", "publish_live")             # before the log (one full file a flush)
    _wrap(getattr(ring_dump, "LivePublisher", None), "publish", "publish_live")
    _wrap(ring_dump, "read_live", "read_live")
    _wrap(ring.RingRecorder, "_exchange_live", "exchange_live")
    _wrap(ring_dump.TriggerLog, "poll", "trigger_poll")
    _wrap(ring.RingRecorder, "_note_memory", "note_memory")
    _wrap(ring_store.Packed, "__init__", "pack")


def _other(session: str, seconds: float, rate: float) -> None:
    """The other shard: the same requests into its own ring of the session."""
    from kvtrace.tracer.ring import open_recorder
    rec = open_recorder(session, "decode", "30s")
    stop = threading.Event()
    t = threading.Thread(target=_produce, args=(rec, stop, rate), daemon=True)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    rec.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--rate", type=float, default=400.0)
    p.add_argument("--late", type=float, default=1.0, help="ms: a wake-up this late is charged to a step")
    p.add_argument("--other", type=int, default=1, help="1: a second process records the other shard")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _other(a.child, a.seconds + 1, a.rate)
        return 0
    from kvtrace.tracer.ring import open_recorder
    tmp = tempfile.mkdtemp(prefix="kvtrace-holds-")
    session = os.path.join(tmp, "s.kvtrace")
    try:
        _instrument()
        rec = open_recorder(session, "prefill", "30s")
        child = None
        if a.other:
            child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", session,
                                      "--seconds", str(a.seconds), "--rate", str(a.rate)])
        sys.setswitchinterval(1e-4)
        stop = threading.Event()
        prod = threading.Thread(target=_produce, args=(rec, stop, a.rate), daemon=True)
        prod.start()
        time.sleep(1.0)          # warm-up: the first flushes (imports, first live.json)
        _SPANS.clear()
        wakes = []
        end = time.perf_counter() + a.seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            time.sleep(0.0002)
            t1 = time.perf_counter()
            wakes.append((t0 + 0.0002, t1))
        stop.set()
        prod.join()
        spans = [s for s in _SPANS if s[2] >= wakes[0][0] - 1]
        if child is not None:
            child.wait()
        rec.close()
        late = sorted((t1 - t0) * 1e3 for t0, t1 in wakes)
        flushes = sum(1 for s in spans if s[0] == "flush") or 1
        charged = collections.Counter()
        for t0, t1 in wakes:
            if (t1 - t0) * 1e3 <= a.late:
                continue
            best = None
            for s in spans:   # the innermost step overlapping most of the delay
                if s[2] <= t1 and s[3] >= t0 and (best is None or s[1] > best[1]):
                    best = s
            charged[best[0] if best else "(none: outside a flush)"] += 1
        by = collections.defaultdict(list)
        for s in spans:
            by[s[0]].append((s[3] - s[2]) * 1e3)
        print(f"producer {a.rate:.0f} requests/s, {a.seconds:.0f} s, {flushes} flushes, other shard: {bool(a.other)}; "
              f"switch interval 0.1 ms; probe wake-ups {len(late)}: median {statistics.median(late):.3f} ms, "
              f"p99 {statistics.quantiles(late, n=100)[98]:.3f}, max {late[-1]:.2f}, >{a.late:g} ms "
              f"{sum(x > a.late for x in late)}, >2 ms {sum(x > 2 for x in late)}, >5 ms {sum(x > 5 for x in late)}")
        print(f"  {'step':16s} {'calls':>6s} {'ms/flush':>9s} {'max ms':>8s} {'late wake-ups':>14s}")
        for name, ds in sorted(by.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {name:16s} {len(ds):6d} {sum(ds) / flushes:9.2f} {max(ds):8.2f} {charged.get(name, 0):14d}")
        for name in charged:
            if name not in by:
                print(f"  {name:16s} {'':6s} {'':9s} {'':8s} {charged[name]:14d}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
