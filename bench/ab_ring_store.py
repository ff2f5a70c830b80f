"""The ring store's per-event CPU (bookkeeping, packing, eviction): this checkout's tracer/ring_store.py
vs another's, interleaved, replaying a recorded trace's events in 2000-row flushes (as bench_ring.py
[ingest] does).

    .venv/bin/python bench/ab_ring_store.py TRACE OTHER/tracer/ring_store.py [REPS]
"""
import importlib.util
import os
import statistics
import sys
import time

from kvtrace.tracer.reader import open_trace
def load(path, name):
    spec = importlib.util.spec_from_file_location("kvtrace.tracer." + name, path)
    m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m); return m
new = load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tracer", "ring_store.py"), "ring_store_new")
old = load(sys.argv[2], "ring_store_old")
t = open_trace(sys.argv[1])
data = []
for sh in t.shards:
    ev = sh.streams["events"].table
    data.append([b for b in ev.to_batches(max_chunksize=2000) if b.num_rows])
n = sum(sum(b.num_rows for b in bs) for bs in data)
def run(mod):
    c0 = time.thread_time()
    for bs in data:
        store = mod.RingStore(window_ns=int(0.5e9), slack_ns=int(1e9))
        for b in bs:
            store.add("events", b); store.evict(b.column("t_ns")[-1].as_py())
    return time.thread_time() - c0
res = {"old": [], "new": []}
for r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 15):
    res["old"].append(run(old)); res["new"].append(run(new))
for k, v in res.items():
    print(f"  {k}: ring bookkeeping + eviction, best {min(v)/n*1e6:.2f} us/event  median {statistics.median(v)/n*1e6:.2f} us/event")
print(f"  {n} events, new/old best {min(res['new'])/min(res['old']):.2f} median {statistics.median(res['new'])/statistics.median(res['old']):.2f}")
