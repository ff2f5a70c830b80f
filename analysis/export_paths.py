"""Output-path checks shared by export, report and sweep: fail early with one line."""
from __future__ import annotations

import os


def check_output_file(path: str) -> str:
    """Raise UserError unless ``path`` can be created or overwritten as a file."""
    from kvtrace.cli import UserError

    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory; give a file name")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise UserError(f"{parent}: output folder does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UserError(f"{path}: not writable")
    return path


def make_output_dir(path: str, force: bool = False) -> str:
    """:func:`check_output_dir`, then create it (so a read-only or virtual file system
    fails here, with one line, before any work)."""
    from kvtrace.cli import UserError

    path = check_output_dir(path, force)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UserError(f"{path}: cannot create ({e.strerror or e})") from None
    return path


def check_output_dir(path: str, force: bool = False) -> str:
    """Raise UserError unless ``path`` can be created (or reused, empty or with force)."""
    from kvtrace.cli import UserError

    path = os.path.abspath(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UserError(f"{path}: exists and is not a directory")
        if os.listdir(path) and not force:
            raise UserError(f"{path}: directory is not empty (use --force to write into it)")
        if not os.access(path, os.W_OK):
            raise UserError(f"{path}: not writable")
        return path
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise UserError(f"{parent}: output folder does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"{parent}: not writable")
    return path
