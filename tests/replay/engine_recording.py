"""Record a reference-engine session for a replay test (one place for the command line and
for what a failed recording means)."""
import os
import subprocess
import sys

import pytest


def record_engine(out: str, workload: str, inject=()) -> str:
    """Record ``workload`` with the bugs in ``inject`` to ``out`` (kept if already there)."""
    if os.path.isdir(out):
        return out
    args = [sys.executable, "-m", "kvtrace", "record", "--workload", workload, "--no-progress", "-o", out]
    for bug in inject:
        args += ["--inject", bug]
    r = subprocess.run(args, capture_output=True, text=True, timeout=240)
    if r.returncode != 0 and not os.path.isdir(out):
        pytest.importorskip("nixl._api")          # the engine needs NIXL; without it, skip
        pytest.fail(f"the reference engine failed: {r.stderr.strip().splitlines()[-1:]}")
    return out
