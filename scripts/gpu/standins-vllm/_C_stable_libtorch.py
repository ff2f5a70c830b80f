"""Stand-in for vLLM's compiled ``vllm._C_stable_libtorch`` (its custom ops, 85 MB, built for
the engines venv's torch), copied into the packed vLLM tree by scripts/gpu/pack_vllm.sh for
the GPU machine only. vLLM's CUDA platform module imports it to register the ops
(vllm/platforms/cuda.py); the NIXL connector's path calls none of them. Every name is a
stand-in; calling one raises (see _gpu_standin.py)."""
import sys

import _gpu_standin

_gpu_standin.install(sys.modules[__name__])
