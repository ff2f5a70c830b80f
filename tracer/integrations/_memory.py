"""Checksums of engine memory given by raw pointers (what connectors hand to NIXL).

DRAM is hashed in place from the pointer (a zero-copy numpy view); VRAM through the
GPU checksum kernel on a zero-copy CUDA view (``__cuda_array_interface__``). Both give
kvh64 (kernels/checksum.py), the hash the checks and replay compare; on DRAM its C path reads
the slots where they lie, with the GIL released.

``record_writes``: the producer's write events, ordered now, their checksums filled in when
ready (tracer/async_sums.py): host memory hashed on the recorder's hashing thread, device
memory's kernels queued in the hook and waited for on that thread.

``KVTRACE_CHECKSUM_LOG=FILE``: each hashing call appends one JSON line (pid, the hook that
asked, bytes, wall and thread CPU seconds) to FILE, so a benchmark can say how much of a
traced run was hashing (bench/bench_real_connector.py).
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import time

import numpy as np

_LOG = os.environ.get("KVTRACE_CHECKSUM_LOG")
#: "1": producers' page checksums are hashed inside the hook, as before async_sums (A/B benchmarks)
ENV_SYNC = "KVTRACE_SYNC_CHECKSUMS"


def _logged(nbytes_of):
    """Time the decorated hashing call into KVTRACE_CHECKSUM_LOG when it is set (else leave
    it as it is); ``nbytes_of(*args)``: the bytes that call hashes."""
    def wrap(fn):
        if not _LOG:
            return fn

        def timed(*args, **kw):
            t0, c0 = time.perf_counter(), time.thread_time()
            out = fn(*args, **kw)
            wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
            with open(_LOG, "a") as f:   # one short line per call: appends do not interleave
                f.write(json.dumps({"pid": os.getpid(), "fn": fn.__name__, "by": sys._getframe(1).f_code.co_name,
                                    "bytes": nbytes_of(*args), "wall_s": wall, "cpu_s": cpu}) + "\n")
            return out
        timed.__name__, timed.__doc__ = fn.__name__, fn.__doc__
        return timed
    return wrap


class _CudaBytes:
    """A raw device pointer seen as a 1-D uint8 CUDA array (no copy, no ownership)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (int(ptr), False),
                                         "version": 3, "strides": None}


def region_view(ptr: int, nbytes: int, mem_type: str, device: int = 0):
    """The region as an array the kernels accept."""
    if mem_type == "VRAM":
        import torch
        return torch.as_tensor(_CudaBytes(ptr, nbytes), device=f"cuda:{device}")
    return _dram_view(int(ptr), int(nbytes))


@functools.lru_cache(maxsize=4096)
def _dram_view(ptr: int, nbytes: int) -> np.ndarray:
    """A flat uint8 view of host memory, made once per region: making one costs tens of
    microseconds, more than hashing a small page (the view owns nothing and reads whatever
    the address holds when hashed, like a fresh one would)."""
    return np.ctypeslib.as_array((ctypes.c_ubyte * nbytes).from_address(ptr))


@_logged(lambda ptr, slot_bytes, num_slots, slots, *a: len(slots) * slot_bytes)
def slot_checksums(ptr: int, slot_bytes: int, num_slots: int, slots, mem_type: str = "DRAM",
                   device: int = 0) -> list[int]:
    """kvh64 of each of ``slots`` of a region of ``num_slots`` slots of ``slot_bytes``."""
    from ...kernels.api import checksum_slots
    s = np.asarray(slots, dtype=np.int64)
    if len(s) == 0:
        return []
    if s.min() < 0 or s.max() >= num_slots:  # never read outside the region
        raise ValueError(f"slot {int(s.max() if s.max() >= num_slots else s.min())} outside a region of {num_slots} slots")
    view = region_view(ptr, slot_bytes * num_slots, mem_type, device)
    return checksum_slots(view, s * slot_bytes, slot_bytes).tolist()


@_logged(lambda regions, slots, **kw: len(slots) * sum(r.item for r in regions))
def region_checksums(regions, slots, *, release_gil: bool | None = None) -> list[list[int]]:
    """kvh64 of the same ``slots`` in each of ``regions`` (objects with ptr, item, slots,
    mem, device), in one kernel call: per-call overhead dominates small pages. Host memory
    goes straight to kvh64_ranges (its C path hashes every page of every layer where it
    lies, in one call; ``release_gil``: see there); device memory through the kernels' facade."""
    return region_checksums_later(regions, slots, release_gil=release_gil)()


def region_checksums_later(regions, slots, *, release_gil: bool | None = None):
    """:func:`region_checksums` in two halves: the device memory's kernels are queued now
    (on the current stream: after the producer's queued work), host memory is hashed now;
    the returned function waits for the device and gives the lists."""
    from ...kernels.api import checksum_slots_later
    from ...kernels.checksum import kvh64_ranges
    s = np.asarray(slots, dtype=np.int64)
    if len(s) == 0 or not regions:
        return lambda: [[] for _ in regions]
    for r in regions:
        if s.min() < 0 or s.max() >= r.slots:  # never read outside a region
            raise ValueError(f"slot {int(s.max())} outside a region of {r.slots} slots")
    by_mem: dict[tuple, list[int]] = {}
    for i, r in enumerate(regions):  # one call per memory kind/device: a launch sees one device
        by_mem.setdefault((r.mem, r.device), []).append(i)
    parts = []   # (region indexes, function giving their sums)
    n = len(s)
    for (mem, dev), idx in by_mem.items():
        views = [region_view(regions[i].ptr, regions[i].item * regions[i].slots, mem, dev) for i in idx]
        items = np.repeat(np.asarray([regions[i].item for i in idx], dtype=np.int64), n)
        offs = np.tile(s, len(idx)) * items
        reg = np.repeat(np.arange(len(idx), dtype=np.int64), n)
        if mem == "DRAM":   # slots checked above
            sums = kvh64_ranges(views, offs, items, reg, release_gil=release_gil)
            parts.append((idx, lambda sums=sums: sums))
        else:
            parts.append((idx, checksum_slots_later(views, offs, items, reg)))

    def result() -> list[list[int]]:
        out: list[list[int]] = [[] for _ in regions]
        for idx, sums_of in parts:
            sums = sums_of().tolist()
            for k, i in enumerate(idx):
                out[i] = sums[k * n:(k + 1) * n]
        return out
    return result


@_logged(lambda later, nbytes: nbytes)
def device_sums_ready(later, nbytes: int) -> list[list[int]]:
    """Wait for sums queued by :func:`region_checksums_later` (timed like a hashing call)."""
    return later()


def warm_device_hash(regions) -> None:
    """Hash slot 0 of one device region per (device, page size) now, at set-up: the GPU
    kernel's first use (compiling or loading it: 0.5-1 s measured on an H200) then happens
    while the engine starts, not inside its first transfer's hook."""
    seen = set()
    for r in regions:
        if r.mem == "DRAM" or r.slots < 1 or not getattr(r, "summed", True) or (r.device, r.item) in seen:
            continue
        seen.add((r.device, r.item))
        try:
            region_checksums([r], [0])
        except Exception:   # a hash that cannot run fails again in the hooks, recorded as unknown there
            return


def record_writes(rec, agent: str, request, regions, slots, pages) -> None:
    """Write events for ``slots`` of every one of ``regions`` (the producer filled them):
    ordered now, their checksums filled in by the recorder's hashing thread (off the
    engine's critical path; see tracer/async_sums.py for what that hash sees). Host memory
    is hashed there with the GIL given away; device memory's kernels are queued here, on
    the caller's current stream (so they follow the producer's queued writes, as a
    synchronous hash would), and the hashing thread only waits for their sums."""
    sl = [int(s) for s in slots]
    regs = list(regions)
    if not regs or not sl:
        return
    sync = os.environ.get(ENV_SYNC, "") in ("1", "true", "yes")
    if not sync and all(r.mem == "DRAM" for r in regs):
        arr = np.asarray(sl, dtype=np.int64)

        def hashed_in_background():   # (the name the checksum log gives these calls)
            return region_checksums(regs, arr, release_gil=True)
        rec.write_async(agent, request, [(r.pool, r.layer) for r in regs], sl, hashed_in_background, pages)
        return
    if not sync and all(r.mem != "DRAM" for r in regs):
        later = region_checksums_later(regs, sl)   # raises as the synchronous path does
        nbytes = len(sl) * sum(r.item for r in regs)

        def hashed_on_device():   # (the name the checksum log gives these calls)
            return device_sums_ready(later, nbytes)
        rec.write_async(agent, request, [(r.pool, r.layer) for r in regs], sl, hashed_on_device, pages)
        return
    for r, sums in zip(regs, region_checksums(regs, sl)):
        rec.write(agent, request, r.pool, r.layer, sl, sums, pages)
