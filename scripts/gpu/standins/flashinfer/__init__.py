"""Stand-in: see _gpu_standin.py."""
import sys

import _gpu_standin

_gpu_standin.install(sys.modules[__name__])
