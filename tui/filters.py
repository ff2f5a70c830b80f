"""The timeline filter: parse ``request=r1 agent=decode kind=free,alloc slot=5 text``
into the parameters of one fixed query (sql/filter_ords.sql; never SQL built from text)."""
from __future__ import annotations

import dataclasses
import shlex

from ..errors import UsageError

FIELDS = ("request", "agent", "pool", "slot", "kind", "xfer", "shard")


class FilterError(UsageError, ValueError):
    """A filter the user typed that cannot be understood (shown inline)."""


@dataclasses.dataclass(frozen=True)
class Filter:
    """What the timeline shows; empty fields do not restrict."""

    request: str | None = None
    agent: str | None = None
    pool: str | None = None
    slot: int | None = None
    kind: tuple[str, ...] = ()
    xfer: int | None = None
    shard: str | None = None
    text: str | None = None

    @property
    def empty(self) -> bool:
        return self == Filter()

    def describe(self) -> str:
        """The filter as the user would type it."""
        parts = []
        for f in FIELDS:
            v = getattr(self, f)
            if f == "kind" and v:
                parts.append("kind=" + ",".join(v))
            elif f != "kind" and v is not None:
                parts.append(f"{f}={v}")
        if self.text:
            parts.append(shlex.quote(self.text))
        return " ".join(parts)

    def params(self, by_desc: bool = False) -> dict:
        """The named parameters of ``sql/filter_ords.sql`` (None: the field does not restrict).

        With ``by_desc`` a slot filter also keeps the transfer events whose descriptors
        touch the slot (rows (shard, xfer) of the temp table ``tui_slot_xfers``, which
        the caller fills first).
        """
        return {"request": self.request, "shard": self.shard, "agent": self.agent, "pool": self.pool,
                "slot": self.slot, "kinds": list(self.kind) or None, "xfer": self.xfer,
                "text": f"%{self.text}%" if self.text else None, "by_desc": bool(by_desc)}


def parse_filter(text: str) -> Filter:
    """Parse the filter bar. ``field=value`` tokens set fields; the rest is free text."""
    try:
        tokens = shlex.split(text or "")
    except ValueError as e:
        raise FilterError(f"filter: {e}") from None
    fields: dict = {}
    free = []
    for tok in tokens:
        key, eq, val = tok.partition("=")
        if not eq:
            free.append(tok)
            continue
        key = key.strip().lower()
        if key not in FIELDS:
            raise FilterError(f"filter: unknown field {key!r} (use {', '.join(FIELDS)})")
        if key in ("slot", "xfer"):
            try:
                fields[key] = int(val)
            except ValueError:
                raise FilterError(f"filter: {key} must be a number, got {val!r}") from None
        elif key == "kind":
            fields[key] = tuple(k for k in val.split(",") if k)
        else:
            fields[key] = val
    return Filter(text=" ".join(free) or None, **fields)
