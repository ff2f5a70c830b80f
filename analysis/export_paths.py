"""Output-path checks shared by export, report and sweep: fail early with one line."""
from __future__ import annotations

import os


def check_output_file(path: str) -> str:
    """Raise OutputError unless ``path`` can be created or overwritten as a file."""
    from kvtrace.errors import OutputError

    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise OutputError(f"{path}: is a directory; give a file name")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise OutputError(f"{parent}: output folder does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise OutputError(f"{path}: not writable")
    return path


def make_output_dir(path: str, force: bool = False) -> str:
    """:func:`check_output_dir`, then create it (so a read-only or virtual file system
    fails here, with one line, before any work)."""
    from kvtrace.errors import OutputError

    path = check_output_dir(path, force)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{path}: cannot create ({e.strerror or e})") from None
    return path


def check_output_dir(path: str, force: bool = False) -> str:
    """Raise OutputError unless ``path`` can be created (or reused, empty or with force)."""
    from kvtrace.errors import OutputError

    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise OutputError(f"{path}: exists and is not a directory")
        if os.listdir(path) and not force:
            raise OutputError(f"{path}: directory is not empty (use --force to write into it)")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{path}: not writable")
        return path
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise OutputError(f"{parent}: output folder does not exist")
    if not os.access(parent, os.W_OK):
        raise OutputError(f"{parent}: not writable")
    return path
