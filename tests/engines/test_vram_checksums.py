"""Engine memory by raw pointer: VRAM regions are hashed through the GPU checksum kernel
in place and give the same kvh64 as the same bytes in DRAM."""
from __future__ import annotations

import types

import numpy as np
import pytest

from kvtrace.tracer.integrations._memory import region_checksums, slot_checksums

pytestmark = pytest.mark.gpu


def test_vram_region_checksums_match_dram():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    items, slots = (4608, 1024), 48
    host = [rng.integers(0, 256, item * slots, dtype=np.uint8) for item in items]
    dev = [torch.from_numpy(h).cuda() for h in host]
    regs = lambda mem, bufs: [types.SimpleNamespace(ptr=(b.data_ptr() if mem == "VRAM" else b.ctypes.data),  # noqa: E731
                                                    item=item, slots=slots, mem=mem, device=0)
                              for b, item in zip(bufs, items)]
    pick = [0, 7, 31, 47, 3]
    on_gpu = region_checksums(regs("VRAM", dev), pick)
    on_cpu = region_checksums(regs("DRAM", host), pick)
    assert on_gpu == on_cpu
    assert on_cpu[0] == slot_checksums(host[0].ctypes.data, items[0], slots, pick)
    assert len(set(on_cpu[0])) == len(pick)
