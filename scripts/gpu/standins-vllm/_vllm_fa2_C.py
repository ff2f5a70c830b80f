"""Stand-in for vLLM's compiled flash-attention 2 ops (``vllm.vllm_flash_attn._vllm_fa2_C``, 71 MB,
built for another torch), copied into the packed vLLM tree by scripts/gpu/pack_vllm.sh for the
GPU machine only. On the CUDA platform vLLM imports vllm.vllm_flash_attn on the NIXL connector's
import path (nixl/base_worker.py -> v1/worker/utils.py -> attention layers -> fa_utils.py), which
refuses to import unless one flash-attention extension is present; nothing on the connector's
path runs attention. Every name is a stand-in; calling one raises (see _gpu_standin.py)."""
import sys

import _gpu_standin

_gpu_standin.install(sys.modules[__name__])
