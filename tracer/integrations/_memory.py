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
