import os
import subprocess
import sys

import pytest

try:  # Hypothesis tests are reproducible: the same examples every run, no example database
    from hypothesis import settings as _hyp_settings
    _hyp_settings.register_profile("kvtrace", derandomize=True, database=None, deadline=None)
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kvtrace"))
except ImportError:
    pass

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")
# KVTRACE_VALIDATOR: a copy elsewhere (scripts/gpu/run_h200.sh carries one to the H200)
VALIDATOR = os.environ.get("KVTRACE_VALIDATOR") or os.path.join(SHARED, "tools", "validate_trace.py")


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def validate(trace_dir: str) -> None:
    """Assert that ../shared/tools/validate_trace.py accepts the trace (skips if absent)."""
    if not os.path.exists(VALIDATOR):
        pytest.skip("shared validator not present")
    r = subprocess.run([sys.executable, VALIDATOR, str(trace_dir)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture
def validate_trace():
    return validate
