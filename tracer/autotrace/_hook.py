"""Import hook: replace ``nixl_agent`` in NIXL's ``_api`` module right after it executes.

The PyPI ``nixl`` package is a shim whose ``__init__`` imports the real backend module
(``nixl_cu13._api``, ``nixl_cu12._api`` or ``nixl_rocm._api``), aliases it as
``nixl._api`` and copies its public names onto ``nixl``. Patching the backend module as
it finishes executing therefore covers ``from nixl._api import nixl_agent``,
``from nixl import nixl_agent`` and ``nixl.nixl_agent`` alike. Older NIXL wheels ship
the real class in ``nixl._api`` itself, which is covered too.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

TARGETS = frozenset({"nixl._api", "nixl_cu12._api", "nixl_cu13._api", "nixl_rocm._api"})


def patch_module(module) -> None:
    """Make ``module.nixl_agent`` the TracedAgent of the class it defines (idempotent)."""
    base = getattr(module, "nixl_agent", None)
    if not isinstance(base, type) or hasattr(module, "_kvtrace_original_nixl_agent"):
        return
    from ..agent import traced_class
    module._kvtrace_original_nixl_agent = base
    module.nixl_agent = traced_class(base)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            patch_module(module)
        except Exception as e:  # tracing must never break the traced program
            print(f"kvtrace: could not trace NIXL agents ({e})", file=sys.stderr)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _NixlFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


def install_finder() -> None:
    """Put the finder first on sys.meta_path; patch modules imported already."""
    if not any(isinstance(f, _NixlFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _NixlFinder())
    for name in TARGETS:
        mod = sys.modules.get(name)
        if mod is not None:
            patch_module(mod)
            top = sys.modules.get("nixl")
            if top is not None and getattr(top, "nixl_agent", None) is mod._kvtrace_original_nixl_agent:
                top.nixl_agent = mod.nixl_agent
