"""Injected bugs that can start late: a worker's bugs take effect once ``after`` requests
have started on its side (``kvtrace record --inject BUG --inject-after N``), so a long
clean stretch precedes the first corruption -- what a flight recorder must catch."""
from __future__ import annotations


class Injection:
    """The set of injected bug names as a worker tests it (``"early-src-free" in bugs``)."""

    def __init__(self, names=(), after: int = 0):
        self.names = frozenset(names)
        self.after = int(after)
        self.started = 0
        """requests started on this side so far"""

    def __contains__(self, name: str) -> bool:
        return name in self.names and self.started >= self.after

    def __iter__(self):
        return iter(self.names if self.started >= self.after else ())

    def start(self) -> None:
        """One more request started on this side."""
        self.started += 1
