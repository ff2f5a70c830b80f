"""kvtrace's top-level ``kernels/`` folder must not shadow PyPI's ``kernels`` (which
``transformers`` imports, and SGLang requires) in a recorded program started from the
repository root with ``-c`` or ``-m`` (the root is then first on sys.path)."""
from __future__ import annotations

import os
import subprocess

import pytest

from engine_runs import PY, ROOT, need_engines

PROBE = "import kernels, os; print(os.path.realpath(kernels.__file__))"


def pypi_kernels() -> str:
    p = subprocess.run([PY, "-c", PROBE], capture_output=True, text=True, cwd="/")
    if p.returncode != 0:
        pytest.skip("PyPI 'kernels' is not installed in the engines venv")
    return p.stdout.strip()


@pytest.mark.parametrize("how", ["-c", "-m"])
def test_recorded_program_from_repo_root_gets_pypi_kernels(tmp_path, how):
    need_engines()
    theirs = pypi_kernels()
    assert theirs != os.path.realpath(os.path.join(ROOT, "kernels", "__init__.py"))
    prog = [PY, "-c", PROBE] if how == "-c" else [PY, "-m", "probe_kernels"]
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    (tmp_path / "probe_kernels.py").write_text(PROBE + "\n")
    plain = subprocess.run(prog, capture_output=True, text=True, cwd=ROOT, env=env)
    assert plain.stdout.strip() == os.path.realpath(os.path.join(ROOT, "kernels", "__init__.py")), \
        "from the root, an unrecorded program sees the repo's folder (the clash this guards against)"
    rec = subprocess.run([PY, "-m", "kvtrace", "record", "--hooks", "sglang", "-o", str(tmp_path / "t.kvtrace"),
                          "--"] + prog, capture_output=True, text=True, cwd=ROOT, env=env)
    assert rec.returncode == 0, rec.stderr
    assert rec.stdout.strip() == theirs
