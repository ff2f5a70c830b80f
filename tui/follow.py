"""What ``n``/``p`` follow from the event under the cursor: its request, its slot, its
transfer — or, after a jump from the findings panel, the finding's events."""
from __future__ import annotations

import enum

from .facts import xfer_key


class Follow(str, enum.Enum):
    """The thing n/p step through."""

    REQUEST = "request"
    SLOT = "slot"
    XFER = "transfer"
    FINDING = "finding"

    def next(self, has_finding: bool) -> "Follow":
        """The mode ``m`` switches to."""
        order = [Follow.REQUEST, Follow.SLOT, Follow.XFER] + ([Follow.FINDING] if has_finding else [])
        return order[(order.index(self) + 1) % len(order)] if self in order else Follow.REQUEST


def follow_predicate(mode: Follow, row: dict | None, slot: tuple | None = None) -> tuple[tuple, str] | None:
    """((kind, key), label) for the events that share ``mode`` with ``row``: the posting
    list and key TimelineSource.find looks up (kvtrace/model/follow_index.py KEYS).

    ``slot`` = (agent, pool, slot) overrides the row's first slot (chosen on the slot map).
    None when the row has nothing to follow (e.g. a register event has no request).
    """
    if row is None:
        return None
    if mode is Follow.REQUEST and row.get("request") is not None:
        return ("request", (row["request"],)), f"request {row['request']}"
    if mode is Follow.SLOT:
        if slot is None and row.get("pool") is not None and row.get("slots"):
            slot = (row["agent"], row["pool"], list(row["slots"])[0])
        if slot is not None:
            return (("slot", (slot[0], slot[1], int(slot[2]))),
                    f"slot {slot[0]}/{slot[1]}/{slot[2]}")
    if mode is Follow.XFER:
        k = xfer_key(row)
        if k is not None:
            return ("xfer", (k[0], int(k[1]))), f"transfer {k[0]}#x{k[1]}"
    return None
