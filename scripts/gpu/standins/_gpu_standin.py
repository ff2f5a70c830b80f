"""Stand-ins for SGLang's compiled GPU-kernel packages, for the H200 run of
tests/engines/sglang_pd.py only (they travel on the device-only PYTHONPATH, never here).

The H200 image has neither flashinfer nor sgl_kernel. SGLang's NIXL connector calls no
kernel of theirs, but with CUDA visible some modules it imports do ``from PKG import NAME``
at import time (SGLang 0.5.21: layers/quantization/fp8_utils.py takes flashinfer's
``bmm_fp8``; compressed_tensors_w8a8_int8.py takes sgl_kernel's ``int8_scaled_mm``).
A stand-in package has every name and every submodule; calling or using one raises.
"""
import importlib.abc
import importlib.machinery
import sys
import types
import typing


class Missing:
    """A name the program imported but never uses; any use raises."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *a, **k):
        raise RuntimeError(f"{self._name}: stand-in (the real GPU kernel package is not installed)")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}")

    def __repr__(self):
        return f"<stand-in {self._name}>"

    def __or__(self, other):   # a name used in an annotation (``NAME | None``, evaluated at import)
        return typing.Any

    __ror__ = __or__


def _module_getattr(prefix):
    def get(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{prefix}.{name}")
    return get


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self):
        self.roots = set()

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots and "." in fullname:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _module_getattr(spec.name)
        return m

    def exec_module(self, module):
        pass


_FINDER = _Finder()


def install(module) -> None:
    """Make ``module`` (a stand-in package's __init__) answer every name and submodule."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
    _FINDER.roots.add(module.__name__)
    module.__getattr__ = _module_getattr(module.__name__)
    module.__version__ = "0.0.0+standin"
