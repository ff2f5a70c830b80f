"""What one engine-side recorder call costs: the C methods (tracer/_rows.c appender) vs the
Python methods, in one process, interleaved.

    .venv/bin/python bench/recorder_calls.py [--rows 20000] [--reps 7] [--no-gc]

Times (thread CPU, best of --reps) the calls engines make, each as the reference engine and
the NIXL tap make them: ``event`` with a dict detail (request lifecycle, control messages)
and with keywords, ``nixl_event`` (the tap's rows, positional), ``layers`` (32 layers per
call), ``allocs`` / ``frees`` (2 pools per call), per row recorded, on one recorder whose
buffer is cleared between reps; and the same loop calling a no-op (the benchmark's own
loop and argument building, included in both). ``--no-gc``: with the garbage collector off
(what collections of the buffered rows cost is the difference).
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--no-gc", action="store_true")
    a = p.parse_args(argv)
    from kvtrace.tracer import recorder as R
    from kvtrace.tracer.schema import EventKind as K
    if R.NATIVE_ROWS is None:
        print("the C methods are not here (extension not built, or KVTRACE_ROWS=python)", file=sys.stderr)
        return 2
    if a.no_gc:
        gc.disable()
    tmp = tempfile.mkdtemp(prefix="kvtrace-calls-")
    rec = R.Recorder(os.path.join(tmp, "c.kvtrace"), "s", flush_interval=3600, flush_rows=1 << 40)
    native = {n: rec.__dict__[n] for n in R._PY_METHODS}
    cases = {
        "event(kind, agent, request, detail=dict)":
            lambda e, n: [e.event(K.REQ_START, "a", "r", detail={"tokens": 3}) for _ in range(n)],
        "event(kind, agent, request, peer, msg, detail=str)":
            lambda e, n: [e.event(K.MSG_SEND, "a", "r", peer="b", msg=b"x", detail="{}") for _ in range(n)],
        "nixl_event(9 positional)":
            lambda e, n: [e.nixl_event("xfer_post", "a", "r", 5, "b", 100, None, None, None) for _ in range(n)],
        "layers(32 layers), per row":
            lambda e, n: [e.layers(K.READ, "a", "r", "kv", 32, (1, 2, 3), (0, 1, 2), None) for _ in range(n // 32)],
        "allocs(2 pools), per row":
            lambda e, n: [e.allocs("a", "r", [("kv", [1, 2], None), ("st", [3], None)]) for _ in range(n // 2)],
        "frees(2 pools), per row":
            lambda e, n: [e.frees("a", "r", [("kv", (1, 2)), ("st", (3,))], reason="finish") for _ in range(n // 2)],
    }

    class NoOp:
        @staticmethod
        def call(*args, **kw):
            return 0
        event = nixl_event = layers = allocs = frees = call

    def time_it(f, obj) -> float:
        rec._events.clear()
        c0 = time.thread_time()
        f(obj, a.rows)
        return (time.thread_time() - c0) / a.rows * 1e6

    try:
        print(f"per row recorded, thread CPU, best of {a.reps} x {a.rows} rows, C and Python interleaved"
              f"{', garbage collector off' if a.no_gc else ''}:")
        for name, f in cases.items():
            best = {"C": 1e9, "Python": 1e9, "no-op": 1e9}
            for _ in range(a.reps):
                rec.__dict__.update(native)
                best["C"] = min(best["C"], time_it(f, rec))
                for n in native:
                    rec.__dict__.pop(n)
                best["Python"] = min(best["Python"], time_it(f, rec))
                best["no-op"] = min(best["no-op"], time_it(f, NoOp))
            print(f"  {name:52s} C {best['C']:6.3f}  Python {best['Python']:6.3f}  "
                  f"(the loop with a no-op call {best['no-op']:6.3f}) us")
        rec.__dict__.update(native)
        rec._events.clear()
        print(f"  (load average {os.getloadavg()[0]:.1f})")
    finally:
        rec.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
