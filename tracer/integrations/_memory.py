"""Checksums of engine memory given by raw pointers (what connectors hand to NIXL).

DRAM is hashed in place from the pointer (a zero-copy numpy view); VRAM through the
GPU checksum kernel on a zero-copy CUDA view (``__cuda_array_interface__``). Both give
kvh64 (kernels/checksum.py), the hash the checks and replay compare.
"""
from __future__ import annotations

import ctypes

import numpy as np


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
    return np.ctypeslib.as_array((ctypes.c_ubyte * int(nbytes)).from_address(int(ptr)))


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


def region_checksums(regions, slots) -> list[list[int]]:
    """kvh64 of the same ``slots`` in each of ``regions`` (objects with ptr, item, slots,
    mem, device), in one kernel call: per-call overhead dominates small pages."""
    from ...kernels.api import checksum_slots
    s = np.asarray(slots, dtype=np.int64)
    if len(s) == 0 or not regions:
        return [[] for _ in regions]
    for r in regions:
        if s.min() < 0 or s.max() >= r.slots:  # never read outside a region
            raise ValueError(f"slot {int(s.max())} outside a region of {r.slots} slots")
    by_mem: dict[tuple, list[int]] = {}
    for i, r in enumerate(regions):  # one call per memory kind/device: a launch sees one device
        by_mem.setdefault((r.mem, r.device), []).append(i)
    out: list[list[int]] = [[] for _ in regions]
    n = len(s)
    for (mem, dev), idx in by_mem.items():
        views = [region_view(regions[i].ptr, regions[i].item * regions[i].slots, mem, dev) for i in idx]
        items = np.repeat(np.asarray([regions[i].item for i in idx], dtype=np.int64), n)
        offs = np.tile(s, len(idx)) * items
        reg = np.repeat(np.arange(len(idx), dtype=np.int64), n)
        sums = checksum_slots(views, offs, items, reg).tolist()
        for k, i in enumerate(idx):
            out[i] = sums[k * n:(k + 1) * n]
    return out
