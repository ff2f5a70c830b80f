"""The ring flush threads' CPU per run on the reference engine (small x200, checksums off,
--ring 30s): time.thread_time() of each kvtrace-flush thread summed at its exit (a wrapper
around Recorder._flush_loop), after a warm-up run; and how many flushes (_flush_locked) ran.

    RUNS=8 .venv/bin/python bench/ring_flush_cpu.py [--prof]   (old code: PYTHONPATH=<farm>)

``--prof``: cProfile inside the flush threads with a thread-CPU timer (top 35 by own time).
``FI=0.5``: the rings' flush interval (default: the code's own).
"""
import cProfile, pstats, sys, time, os, shutil, tempfile, threading, statistics
from kvtrace.tracer import recorder as R
from kvtrace.tracer.engine.runner import run_inprocess
from kvtrace.tracer.engine.workload import load
PROF = "--prof" in sys.argv
tt = []; lock = threading.Lock(); prof = cProfile.Profile() if PROF else None
orig = R.Recorder._flush_loop
def loop(self):
    t = time.thread_time()
    if PROF: p = cProfile.Profile(time.thread_time); p.enable()
    try: orig(self)
    finally:
        if PROF:
            p.disable()
            with lock: prof_list.append(p)
        with lock: tt.append(time.thread_time() - t)
prof_list = []
R.Recorder._flush_loop = loop
nfl = [0]
of = R.Recorder._flush_locked
def fl(self):
    nfl[0] += 1; return of(self)
R.Recorder._flush_locked = fl
if os.environ.get("FI"):
    from kvtrace.tracer import ring as RG
    oi = RG.RingRecorder.__init__
    def ni(self, *a, **kw):
        kw.setdefault("flush_interval", float(os.environ["FI"])); oi(self, *a, **kw)
    RG.RingRecorder.__init__ = ni
wl = load("small", requests=200)
tmp = tempfile.mkdtemp()
runs = int(os.environ.get("RUNS", 6))
per = []
for i in range(runs + 1):
    d = os.path.join(tmp, "t.kvtrace")
    tt.clear(); nfl[0] = 0
    run_inprocess(wl, [], d, checksums=False, ring="30s")
    shutil.rmtree(d, ignore_errors=True)
    if i: per.append((sum(tt), nfl[0], len(tt)))
    if i == 0: prof_list.clear()
print("flush threads CPU ms per run:", [round(x[0]*1e3,1) for x in per], "median", round(statistics.median(x[0] for x in per)*1e3,1), "flush_locked calls", [x[1] for x in per], "threads", per[0][2])
if PROF:
    s = pstats.Stats(prof_list[0])
    for p in prof_list[1:]: s.add(p)
    s.sort_stats("tottime").print_stats(35)
