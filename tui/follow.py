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


#: the parameters of sql/follow_find.sql that say what to follow (None: not this)
NOTHING = {"request": None, "agent": None, "pool": None, "slot": None, "xshard": None, "xfer": None}


def follow_predicate(mode: Follow, row: dict | None, slot: tuple | None = None) -> tuple[dict, str] | None:
    """(parameters of ``sql/follow_find.sql``, label) for the events that share ``mode``
    with ``row``.

    ``slot`` = (agent, pool, slot) overrides the row's first slot (chosen on the slot map).
    None when the row has nothing to follow (e.g. a register event has no request).
    """
    if row is None:
        return None
    if mode is Follow.REQUEST and row.get("request") is not None:
        return dict(NOTHING, request=row["request"]), f"request {row['request']}"
    if mode is Follow.SLOT:
        if slot is None and row.get("pool") is not None and row.get("slots"):
            slot = (row["agent"], row["pool"], list(row["slots"])[0])
        if slot is not None:
            return (dict(NOTHING, agent=slot[0], pool=slot[1], slot=int(slot[2])),
                    f"slot {slot[0]}/{slot[1]}/{slot[2]}")
    if mode is Follow.XFER:
        k = xfer_key(row)
        if k is not None:
            return dict(NOTHING, xshard=k[0], xfer=int(k[1])), f"transfer {k[0]}#x{k[1]}"
    return None
