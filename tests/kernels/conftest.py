"""Kernel tests: pick Triton's interpreter on machines without CUDA.

Triton fixes interpretation when it is first imported (see kernels/_triton.py), so the
switch is set here, at collection, before any kernel test imports triton.
"""
import os
import sys

import pytest

from cuda_probe import has_cuda

CUDA = has_cuda()
if not CUDA and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def interpret():
    """The backend name for Triton-under-interpreter tests (CPU machines only)."""
    if CUDA:
        pytest.skip("compiled Triton is tested by the gpu tests on this machine")
    try:
        import triton  # noqa: F401
    except ImportError:
        pytest.skip("triton not installed")
    return "interpret"
