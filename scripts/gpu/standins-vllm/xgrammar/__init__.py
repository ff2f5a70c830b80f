"""Stand-in: see scripts/gpu/standins-vllm/README and _gpu_standin.py (vLLM imports it; the NIXL
connector calls none of it)."""
import sys

import _gpu_standin

_gpu_standin.install(sys.modules[__name__])
