"""What the flight recorder's flush thread spends per request on its liveness bookkeeping
(RingStore._ingest_events: which owners are live, which slot generations are held), fed
the Recorder's rows as RingRecorder feeds them.

    .venv/bin/python bench/ring_ingest.py [--requests 4000]

Each request: req_start, allocs of 48 slots in two pools, a transfer posted and done, the
frees, req_done (8 events, 192 slot operations). Thread CPU per request, three runs. To
compare two trees, run it with PYTHONPATH set to the other tree's package (see
bench/results/ring.txt).
"""
from __future__ import annotations

import argparse
import sys
import time


def _rows(n: int, start: int) -> list[dict]:
    out, seq = [], start * 10
    for i in range(start, start + n):
        sl = list(range((i % 10) * 48, (i % 10) * 48 + 48))
        for kind, extra in (("req_start", {}), ("alloc", {"pool": "kv0", "slots": sl}),
                            ("alloc", {"pool": "kv1", "slots": sl}), ("xfer_post", {"xfer": i}),
                            ("xfer_done", {"xfer": i}), ("free", {"pool": "kv0", "slots": sl}),
                            ("free", {"pool": "kv1", "slots": sl}), ("req_done", {})):
            seq += 1
            out.append(dict(seq=seq, t_ns=seq * 1000, kind=kind, request=f"r{i}", agent="prefill", **extra))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=4000)
    a = p.parse_args(argv)
    import pyarrow as pa

    from kvtrace.tracer.ring_store import RingStore
    from kvtrace.tracer.schema import EVENTS
    per = max(1, a.requests // 10)
    batches = [pa.RecordBatch.from_pylist(_rows(per, k * per), schema=EVENTS) for k in range(10)]
    # the Recorder's own row tuples (slots as tuples), what RingRecorder passes beside each batch
    tuples = [[tuple(tuple(v) if isinstance(v, list) else v for v in (d.get(c) for c in EVENTS.names))
               for d in b.to_pylist()] for b in batches]
    for _ in range(3):
        store = RingStore(window_ns=10**15)
        t0 = time.thread_time()
        for b, rows in zip(batches, tuples):
            store._ingest_events(b, rows)
        dt = time.thread_time() - t0
        print(f"ring bookkeeping: {dt / (10 * per) * 1e6:5.1f} us per request "
              f"(2 pools x 48 slots allocated and freed, 8 events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
