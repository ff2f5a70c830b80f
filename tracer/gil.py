"""Opt-in: the recorder's flush thread hands the GIL back to the engine's threads quickly.

Why. An engine's transfer worker (SGLang's) runs in short bursts of Python between calls
that give the GIL away (NIXL's, ``time.sleep(0)`` while a transfer runs). When it wants
the GIL back while another thread holds it in Python code, CPython makes it wait up to
``sys.getswitchinterval()`` (5 ms by default) before it asks the holder to let go. The
recorder's flush thread converts buffered rows for several milliseconds at a time (Arrow
batches, the ring's bookkeeping), so each of the worker's bursts during a flush started
up to 5 ms late: on SGLang's real connector recording cost 25-40% of transfer throughput
with the process's CPU time unchanged (bench/results/real_connector.txt), and the cost
went away when the flush was held back (and, in one probe, when this interval was shortened
during the flush).

What. :func:`yielding` lowers the process's switch interval to ``BACKGROUND_SWITCH_S``
while a background job runs (the first of overlapping jobs sets it, the last puts the
engine's own value back), so a waiting engine thread gets the GIL within that interval.
Nothing else changes: threads that hold no GIL are not affected, and when no other thread
wants the GIL the interval is never consulted. A value the program sets meanwhile is kept.
Only the flush uses it: the hashing thread (async_sums.py) spends its time in C with the
GIL given away, and a short interval held over the whole hash made the engine's own threads
hand the GIL to each other far more often (measured worse: ring 0.29 vs 0.48 of plain).
``$KVTRACE_BACKGROUND_SWITCH_S`` sets the interval (seconds, e.g. ``0.0002``); unset or
``0`` (the default) leaves the program's interval alone. Off by default because the
benchmarks did not show it paying: on a loaded 2-core machine (load 5-8) ring mode on SGLang's
connector ran 0.56 vs 0.66 of plain with it, 4 interleaved reps, and the reference engine
equal (bench/results/real_connector.txt, ring.txt): with no idle core a GIL hand-off also
waits for the OS to schedule the other thread, and more hand-offs cost more. Tried where the
recorder's threads have cores of their own (a 16-core H100 host, SGLang's connector, ring without
page checksums): not better either (paused-wave medians -9.9/-12.2 % with it, -9.5/-5.0 % without;
bench/results/gpu-h200-ring.txt).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading

ENV = "KVTRACE_BACKGROUND_SWITCH_S"


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get(ENV) or 0))
    except ValueError:   # a bad value must not stop the traced engine: the default
        return 0.0


#: the switch interval (seconds) while the flush runs (0: the program's, unchanged)
BACKGROUND_SWITCH_S = _interval()

_lock = threading.Lock()
_active = 0
_saved: float | None = None     # the program's interval, put back by the last job to end


@contextlib.contextmanager
def yielding(interval: float | None = None):
    """Run the block with the GIL switch interval at most ``interval`` (see the module doc)."""
    global _active, _saved
    interval = BACKGROUND_SWITCH_S if interval is None else interval
    if interval <= 0:
        yield
        return
    with _lock:
        _active += 1
        if _active == 1:
            current = sys.getswitchinterval()
            if current > interval:
                _saved = current
                sys.setswitchinterval(interval)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved is not None:
                # the program set its own interval meanwhile: keep it
                if abs(sys.getswitchinterval() - interval) < 1e-7:
                    sys.setswitchinterval(_saved)
                _saved = None
