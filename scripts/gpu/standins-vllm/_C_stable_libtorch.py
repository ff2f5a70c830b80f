"""Stand-in for vLLM's compiled ``vllm._C_stable_libtorch`` (its custom ops, 85 MB, built for
the engines venv's torch), copied into the packed vLLM tree by scripts/gpu/pack_vllm.sh for the
GPU machine only. vLLM's CUDA platform module imports it to register the ops
(vllm/platforms/cuda.py); the NIXL connector's path runs none of them. Every name is a
stand-in; calling one raises (see _gpu_standin.py). The capability queries vLLM's modules ask
at import time (``torch.ops._C.cutlass_scaled_mm_supports_*``) are registered and answer
False: these kernels are not here."""
import sys

import torch

import _gpu_standin

_gpu_standin.install(sys.modules[__name__])

_LIB = torch.library.Library("_C", "FRAGMENT")
for _q in ("cutlass_scaled_mm_supports_fp8", "cutlass_scaled_mm_supports_block_fp8",
           "cutlass_scaled_mm_supports_fp4", "cutlass_group_gemm_supported"):
    if not hasattr(torch.ops._C, _q):
        _LIB.define(f"{_q}(int cuda_device_capability) -> bool")
        _LIB.impl(_q, lambda cuda_device_capability: False, "CompositeExplicitAutograd")
