"""What-if replay: re-derive the recorded program under a proposed fix.

A what-if is a function ``apply(edit, args)`` over the operation graph (see ``edit.py``);
the built-in ones live one per file and are listed once, in ``BUILTIN``. A user's own
is named ``module:function`` or ``path/to/file.py:function`` (``docs/what-if.md``).
``--what-if NAME[:ARGS]`` passes ARGS (text after the name) to the function.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
from typing import Callable

from ...errors import UsageError

#: built-in what-ifs: name -> module (each has NAME, SUMMARY and apply(edit, args))
BUILTIN = {
    "per-pool-slot-count": "per_pool_slot_count",
    "free-after-done": "free_after_done",
    "status-after-data": "status_after_data",
}


@dataclasses.dataclass
class WhatIf:
    """A resolved what-if: its name, its function and the arguments to pass."""
    name: str
    fn: Callable
    args: str | None

    @property
    def label(self) -> str:
        return self.name + (f":{self.args}" if self.args else "")


def summaries() -> list[tuple[str, str]]:
    """(name, one line) of every built-in what-if."""
    out = []
    for name, mod in BUILTIN.items():
        m = importlib.import_module(f".{mod}", __name__)
        out.append((name, m.SUMMARY))
    return out


def resolve(spec: str) -> WhatIf:
    """``NAME[:ARGS]`` (built-in) or ``MODULE:FUNCTION[:ARGS]`` / ``FILE.py:FUNCTION[:ARGS]``.

    Raises:
        UsageError: an unknown name, a module that does not import, a missing function.
    """
    name, _, rest = spec.partition(":")
    if name in BUILTIN:
        m = importlib.import_module(f".{BUILTIN[name]}", __name__)
        return WhatIf(name, m.apply, rest or None)
    if not rest:
        raise UsageError(f"--what-if {spec}: unknown what-if (built in: {', '.join(BUILTIN)}; "
                         "or MODULE:FUNCTION for your own)")
    fname, _, args = rest.partition(":")
    mod = _import(name, spec)
    fn = getattr(mod, fname, None)
    if not callable(fn):
        raise UsageError(f"--what-if {spec}: {name} has no function {fname!r}")
    return WhatIf(f"{name}:{fname}", fn, args or None)


def _import(name: str, spec: str):
    try:
        if name.endswith(".py"):
            if not os.path.isfile(name):
                raise UsageError(f"--what-if {spec}: no such file {name}")
            mspec = importlib.util.spec_from_file_location(os.path.basename(name)[:-3], name)
            mod = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(mod)
            return mod
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())   # like `python -m`: modules next to you import
        return importlib.import_module(name)
    except UsageError:
        raise
    except Exception as e:  # the user's module failed to import: say why, in one line
        raise UsageError(f"--what-if {spec}: cannot import {name} ({type(e).__name__}: {e})") from None


@dataclasses.dataclass
class Fixed:
    """The fixed graph and what the fix changed, in words."""
    graph: object
    lines: list[str]
    whatif: WhatIf


def apply(graph, spec) -> Fixed:
    """Re-derive ``graph`` under the what-if ``spec`` (a string or a WhatIf)."""
    from .edit import Edit
    w = resolve(spec) if isinstance(spec, str) else spec
    edit = Edit(graph)
    if w.name in BUILTIN:
        w.fn(edit, w.args)
    else:
        try:
            w.fn(edit, w.args)
        except UsageError:
            raise
        except Exception as e:  # the user's function failed: where and why, in one line
            import traceback
            fr = traceback.extract_tb(e.__traceback__)[-1]
            raise UsageError(f"--what-if {w.label}: {type(e).__name__}: {e} "
                             f"(at {os.path.basename(fr.filename)}:{fr.lineno})") from None
    fixed = edit.build()
    return Fixed(fixed, list(edit.lines), w)
