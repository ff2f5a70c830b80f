"""What recording one event costs at least, piece by piece, in this Python recorder.

    .venv/bin/python bench/ring_floor.py [--requests 200] [--reps 7]

Records one reference-engine run (workload small, checksums off) into a ring, keeping the
row tuples each flush converted, then times on those very rows (best of --reps, one
thread, CPU time per event): a bare ``list.append`` of a ready 20-field tuple (the floor of
any Python tap), building and appending that tuple, ``Recorder.event`` per row, the
batched path (``Recorder.layers`` for the rows it covers), the Arrow conversion of the
flush (``_events_batch``), the ring's liveness bookkeeping from the rows
(``RingStore._ingest_events``) and packing (``Packed``). Also prints what 2% of the
unrecorded run is, per event, for comparison.
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
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args(argv)
    from kvtrace.tracer import recorder as R
    from kvtrace.tracer.engine.runner import run_inprocess
    from kvtrace.tracer.engine.workload import load
    from kvtrace.tracer.ring_store import Packed, RingStore

    wl = load("small", requests=a.requests)
    got: list[list[tuple]] = []
    convert = R.Recorder._convert

    def keep(self, name, rows):
        if name == "events":
            got.append(list(rows))
        return convert(self, name, rows)

    tmp = tempfile.mkdtemp(prefix="kvtrace-floor-")
    try:
        run_inprocess(wl, [], None, checksums=False)
        offs = []
        for _ in range(3):
            c0 = time.process_time()
            run_inprocess(wl, [], None, checksums=False)
            offs.append(time.process_time() - c0)
        R.Recorder._convert = keep
        try:
            run_inprocess(wl, [], os.path.join(tmp, "r.kvtrace"), checksums=False, ring="30s")
        finally:
            R.Recorder._convert = convert
        rows = [r for g in got for r in g]
        n = len(rows)
        clock = time.thread_time

        def best(f) -> float:
            t = 1e9
            for _ in range(a.reps):
                c0 = clock()
                f()
                t = min(t, clock() - c0)
            return t / n * 1e6

        out = {}
        buf: list = []
        ap = buf.append

        def bare():
            buf.clear()
            for r in rows:
                ap(r)
        out["list.append of a ready tuple"] = best(bare)
        fields = [tuple(r) for r in rows]

        def build():
            buf.clear()
            for (s, t, th, ag, k, rq, po, la, sl, pg, cs, x, pe, ad, nb, mt, dv, m, st, de) in fields:
                ap((s, t, th, ag, k, rq, po, la, sl, pg, cs, x, pe, ad, nb, mt, dv, m, st, de))
        out["build + append the 20-field tuple"] = best(build)
        rec = R.Recorder(os.path.join(tmp, "e.kvtrace"), "e", flush_interval=3600, flush_rows=1 << 40)
        names = R._EVENT_COLS
        kws = [{k: v for k, v in zip(names[6:19], r[6:19]) if v is not None} for r in rows]

        def per_call():
            rec._events.clear()
            for r, kw in zip(rows, kws):
                rec.event(r[4], r[3], r[5], detail=r[19], **kw)
        out["Recorder.event per row (keywords)"] = best(per_call)
        lay = [r for r in rows if r[4] in ("write", "read")]

        def batched():
            rec._events.clear()
            for r in lay:
                if r[7] == 0:
                    rec.layers(r[4], r[3], r[5], r[6], 1, r[8], r[9], None)
        if lay:
            t = best(batched) * n / max(1, sum(1 for r in lay if r[7] == 0))
            out["Recorder.layers, one layer per call (per row)"] = t
        rec.close()
        out["Arrow conversion of the flush (_events_batch)"] = best(lambda: [R._events_batch(g) for g in got])
        batches = [R._events_batch(g) for g in got]

        def ingest():
            s = RingStore(window_ns=10 ** 15)
            for b, g in zip(batches, got):
                s._ingest_events(b, g)
        out["ring bookkeeping from the rows (_ingest_events)"] = best(ingest)
        out["ring packing (LZ4 IPC, Packed)"] = best(lambda: [Packed(b) for b in batches])
        off = min(offs)
        print(f"reference engine, workload small x{a.requests}, {n} events; unrecorded run {off:.3f} s CPU: "
              f"2% of it is {0.02 * off / n * 1e6:.2f} us per event")
        for k, v in out.items():
            print(f"  {k:50s} {v:6.3f} us/event")
        print(f"  (best of {a.reps}, thread CPU; load average {os.getloadavg()[0]:.1f})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
