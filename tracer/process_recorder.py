"""This process's Recorder under ``kvtrace record -- CMD``, created from the environment.

A leaf module: the traced agent (agent.py), the hooks and the import-time patcher
(autotrace/) all ask it for the process recorder, so none of them imports another.

Environment (set by the launcher, inherited by children):
    KVTRACE_TRACE_DIR    the trace directory; unset = tracing off
    KVTRACE_REQUEST_TAG  notification tag parser: sglang | vllm | auto | a regex
    KVTRACE_PROG         the program name used in shard names
    KVTRACE_RING         flight recorder: SIZE or DURATION kept in memory (ring.py); unset = write all
"""
from __future__ import annotations

import os
import sys
import threading

ENV_DIR = "KVTRACE_TRACE_DIR"
ENV_TAG = "KVTRACE_REQUEST_TAG"
ENV_PROG = "KVTRACE_PROG"

#: a ring's flush interval (s) under ``record -- CMD``: a file recording flushes every 0.1 s so
#: ``kvtrace watch`` sees it soon; a ring is read only at a trigger, and each flush costs a fixed
#: ~1 ms of the engine's CPU (Arrow conversion and packing, trigger poll) even when idle
RING_FLUSH_S = 0.5      # ring.FLUSH_S (not imported here: this module stays light until a recorder starts)

_lock = threading.Lock()
_recorder = None
_pid = None
_override = None        # (recorder, pid): set by use_recorder
_refused_pid = None     # this process's environment asked for a recorder that cannot be made


def use_recorder(rec) -> None:
    """Route the agents this process creates from now on to ``rec`` (None: back to the
    environment). kvtrace's pytest plugin records one test this way; a forked child
    does not inherit it."""
    global _override
    _override = None if rec is None else (rec, os.getpid())


def default_request_tags() -> str:
    """The tag parser spec for agents created without ``request_tags``."""
    return os.environ.get(ENV_TAG, "auto")


def default_recorder():
    """This process's Recorder when run under ``kvtrace record -- CMD`` (or set by
    ``use_recorder``), else None."""
    global _recorder, _pid
    if _override is not None and _override[1] == os.getpid():
        return _override[0]
    trace_dir = os.environ.get(ENV_DIR)
    if not trace_dir:
        return None
    rec = _recorder
    if rec is not None and _pid == os.getpid():  # every hook asks, on every call: no lock once made
        return rec
    global _refused_pid
    with _lock:
        if _refused_pid == os.getpid():
            return None
        if _recorder is None or _pid != os.getpid():  # a forked child gets its own shard
            import atexit

            from .ring import open_recorder
            prog = os.environ.get(ENV_PROG) or "proc"
            try:
                _recorder = open_recorder(trace_dir, f"{prog}-{os.getpid()}", flush_interval=0.1,
                                          ring_flush_interval=RING_FLUSH_S)
            except ValueError as e:
                # a bad $KVTRACE_RING set by hand (`kvtrace record` checks it before it
                # starts CMD): the traced engine must not fail because of its tracer, so
                # this process records nothing, and says so once
                _refused_pid = os.getpid()
                print(f"kvtrace: not recording process {os.getpid()}: {e}", file=sys.stderr, flush=True)
                return None
            _pid = os.getpid()
            atexit.register(_close, _recorder)
            mp_util = sys.modules.get("multiprocessing.util")
            if mp_util is not None:  # fork children leave through os._exit, skipping atexit
                mp_util.Finalize(None, _close, args=(_recorder,), exitpriority=0)
        return _recorder


def _close(rec) -> None:
    if rec._info.get("pid") == os.getpid():  # never close a recorder inherited over fork
        rec.close()
