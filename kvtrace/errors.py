"""Domain errors: the one leaf module every layer may import.

Libraries raise these; only the command line (``kvtrace/cli.py`` and the ``cli_*``
modules) turns them into one line on stderr and exit status 2. Every message is a
single line written for the user, so the CLI prints it as is.
"""
from __future__ import annotations


class KvtraceError(Exception):
    """Base of every error kvtrace reports to the user (message: one line)."""


class UsageError(KvtraceError):
    """An argument, option or name the user gave that cannot be used; they can fix it."""


class OutputError(KvtraceError):
    """An output path that cannot be created or written."""


class TraceError(KvtraceError):
    """A trace that cannot be used (missing, foreign, corrupt or of another format version)."""


class ResourceError(KvtraceError):
    """The work did not fit what it was given (the memory cap); more of it would let it run."""


class WorkloadError(UsageError, ValueError):
    """A workload file or override for the reference engine that cannot be used."""


class ScheduleError(UsageError, ValueError):
    """A malformed schedule string, or one that does not fit the trace."""
