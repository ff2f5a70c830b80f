"""Is there a usable CUDA GPU? Answered without importing torch (seconds at collection).

Asks the driver's management library (NVML), which, unlike cuInit, creates no CUDA
context, so forked test processes can still use CUDA. When torch is imported already its
own answer is used.
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys


@functools.cache
def has_cuda() -> bool:
    torch = sys.modules.get("torch")
    if torch is not None:
        return bool(torch.cuda.is_available())
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    if nvml.nvmlInit_v2() != 0:
        return False
    try:
        n = ctypes.c_uint(0)
        return nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0 and n.value > 0
    finally:
        nvml.nvmlShutdown()
