"""What ``kvtrace record --hooks`` says at the end of a run, from the manifest."""
from __future__ import annotations

from .. import manifest
from ._patch import unsupported_line
from .table import ENGINES


def hook_lines(trace_dir: str, spec: str) -> list[str]:
    """One line per requested engine that was never hooked (the program did not import its
    connector) or was hooked on a version outside the supported ones."""
    from . import parse
    man = manifest.read(trace_dir)
    out = []
    for name in parse(spec):
        e = ENGINES[name]
        info = man.get(f"hooks_{name}")
        if info is None:
            out.append(f"the program never imported {e.title} ({e.trigger}): no engine facts recorded, "
                       "only NIXL calls")
        elif not info.get("supported") or info.get("missing"):
            out.append(unsupported_line(e, info))
    return out


__all__ = ["hook_lines", "unsupported_line"]
