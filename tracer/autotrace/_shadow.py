"""Keep kvtrace's source folder ``kernels/`` from shadowing PyPI's ``kernels``.

kvtrace installs its GPU kernels as ``kvtrace.kernels`` from a top-level ``kernels/``
folder. A program started from the repository root with ``python -m`` or ``-c`` has the
root on ``sys.path``, so ``import kernels`` (which ``transformers`` does, for Hugging
Face's package of that name) would find kvtrace's folder instead and fail
(``cannot import name 'CUDAProperties' from 'kernels'``). This finder resolves the
top-level name ``kernels`` on every path entry except the one holding kvtrace's folder.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


def _ours() -> str | None:
    try:
        spec = importlib.util.find_spec("kvtrace.kernels")
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return os.path.realpath(locs[0]) if locs else None


class _SkipOwnKernels(importlib.abc.MetaPathFinder):
    def __init__(self, ours: str):
        self._ours = ours

    def find_spec(self, fullname, path, target=None):
        if fullname != "kernels" or path is not None:
            return None
        entries = [p for p in sys.path
                   if os.path.realpath(os.path.join(p or os.getcwd(), "kernels")) != self._ours]
        if len(entries) == len(sys.path):
            return None  # kvtrace's folder is not on the path: nothing to do
        return importlib.machinery.PathFinder.find_spec(fullname, entries)


def install() -> None:
    """Put the finder first on sys.meta_path (idempotent)."""
    if any(isinstance(f, _SkipOwnKernels) for f in sys.meta_path):
        return
    ours = _ours()
    if ours is not None:
        sys.meta_path.insert(0, _SkipOwnKernels(ours))
