"""The reference PD engine: a small, faithful model of SGLang's NIXL KV path on real NIXL.

Prefill and decode are two NIXL agents (TracedAgent when recording) with per-layer
regions of several pools (MLA ``kv`` bf16, ``index_k`` fp8+scales or bf16 with its own
page size, ``state``, ``aux``), page allocators, a decode-side prefix cache for
multi-turn sessions, decode -> prefill registration and per-request page messages,
prepped descriptor lists indexed ``offset(region) + page``, chunked WRITEs with SGLang
tags, prefill polling to DONE, decode completion tracking, frees on finish / abort /
timeout. Producers write provenance content; the engine's verifier checks every page
decode reads and says whose bytes a bad page holds.

Injectable bugs (``BUGS``), off by default, each corrupting through real transfers:
``uniform-slot-count`` (M = buffer 0's slot count indexes every kv_data region),
``early-src-free`` (prefill frees source pages when it hands a chunk to the transfer
worker), ``abort-free-inflight`` (decode frees an aborted request's pages while its
WRITEs may still come), ``notify-first-handle`` (decode takes the first chunk's
notification as completion), ``free-on-received`` (prefill sends decode a "sent" status
after posting a request's last chunk and frees its source pages when decode acknowledges
it with "received"; a transfer worker thread polls the handles to DONE and nobody waits
for it: the acknowledgement follows the status, not the bytes, so the free is not
ordered after the DMA -- clean as recorded, corrupt when a transfer is slower than the
message round trip; only reordering shows it).

Public surface::

    from kvtrace.tracer.engine import load, run_inprocess, run_two_processes, record, BUGS
    summary = record(load("small"), ["early-src-free"], "x.kvtrace", processes=2)
"""
from __future__ import annotations

from .workload import BUGS, Workload, WorkloadError, load, plan, preset_names

__all__ = ["BUGS", "Workload", "WorkloadError", "load", "plan", "preset_names", "record",
           "run_inprocess", "run_two_processes"]


def __getattr__(name: str):
    # runner/cli import pyarrow and NIXL; keep `import kvtrace.tracer.engine` light
    if name in ("run_inprocess", "run_two_processes"):
        from . import runner
        return getattr(runner, name)
    if name == "record":
        from .cli import record
        return record
    raise AttributeError(name)
