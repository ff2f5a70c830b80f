"""Schedule strings: an executed schedule as a short versioned string that replays exactly.

``kvs1:`` + urlsafe base64 (no padding) of zlib-compressed unsigned LEB128 varints:
``chunks, fault, n_prog, n_moves, decision...`` — the graph parameters and size (so a
string pasted against the wrong trace is refused) followed by the index picked at every
step where more than one operation was enabled.
"""
from __future__ import annotations

import base64
import dataclasses
import zlib

from ..errors import ScheduleError
from .schedulers.base import Scheduler

PREFIX = "kvs1:"
FAULTS = (None, "notify-before-data")


@dataclasses.dataclass
class Schedule:
    """A decoded schedule string."""
    chunks: int
    fault: str | None
    n_prog: int
    n_moves: int
    decisions: list[int]


def _varints(vals) -> bytes:
    out = bytearray()
    for v in vals:
        v = int(v)
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                break
    return bytes(out)


def _unvarints(data: bytes) -> list[int]:
    vals, cur, shift = [], 0, 0
    for b in data:
        cur |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            vals.append(cur)
            cur, shift = 0, 0
    if shift:
        raise ScheduleError("schedule string is cut short")
    return vals


def encode(graph, decisions: list[int], chunks: int = 1, fault: str | None = None) -> str:
    """The string of a run's decisions on ``graph``."""
    head = [chunks, FAULTS.index(fault), graph.n_prog, len(graph.move_xfer)]
    raw = zlib.compress(_varints(head + list(decisions)), 9)
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(text: str) -> Schedule:
    """Parse a schedule string (raises ScheduleError with one clear line)."""
    text = text.strip()
    if not text.startswith(PREFIX):
        raise ScheduleError(f"not a kvtrace schedule (expected it to start with {PREFIX!r})")
    body = text[len(PREFIX):]
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (ValueError, zlib.error):
        raise ScheduleError("schedule string is damaged (base64/zlib)") from None
    vals = _unvarints(raw)
    if len(vals) < 4 or vals[1] >= len(FAULTS):
        raise ScheduleError("schedule string is damaged (header)")
    return Schedule(vals[0], FAULTS[vals[1]], vals[2], vals[3], vals[4:])


class DecisionScheduler(Scheduler):
    """Replays a decision list exactly."""

    name = "schedule"

    def __init__(self, decisions: list[int]):
        super().__init__(0)
        self.decisions = list(decisions)

    def start(self, graph, run) -> None:
        super().start(graph, run)
        self.i = 0

    def pick(self, cands: list[int]) -> int:
        if self.i >= len(self.decisions):
            raise ScheduleError("the schedule ends before the trace does (was it made for another trace?)")
        d = self.decisions[self.i]
        self.i += 1
        if d >= len(cands):
            raise ScheduleError(f"decision {self.i - 1} picks {d} of {len(cands)} enabled operations "
                                "(was the schedule made for another trace?)")
        return d
