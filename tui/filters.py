"""The timeline filter: parse ``request=r1 agent=decode kind=free,alloc slot=5 text``
into a SQL predicate with parameters (never string-pasted values)."""
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

    def predicate(self, slot_xfers: bool = False) -> tuple[str, list]:
        """A SQL boolean over the ``tl`` view's columns, and its parameters.

        With ``slot_xfers`` a slot filter also keeps the transfer events whose
        descriptors touch the slot (rows (shard, xfer) of the temp table
        ``tui_slot_xfers``, which the caller fills first).
        """
        conds: dict[str, tuple[str, list]] = {}
        for col in ("request", "agent", "pool", "shard"):
            v = getattr(self, col)
            if v is not None:
                conds[col] = (f"{col} = ?", [v])
        if self.kind:
            conds["kind"] = ("kind IN (" + ",".join("?" * len(self.kind)) + ")", list(self.kind))
        if self.xfer is not None:
            conds["xfer"] = ("(xfer = ? OR pair_xfer = ?)", [self.xfer, self.xfer])
        if self.slot is not None:
            sql, params = "list_contains(slots, ?)", [self.slot]
            if slot_xfers:
                # transfer events carry no pool or slot: keep them by descriptor, and do
                # not let the agent/pool conditions drop them
                for col in ("agent", "pool"):
                    if col in conds:
                        c, p = conds.pop(col)
                        sql, params = f"{c} AND {sql}", p + params
                sql = (f"(({sql}) OR (shard, xfer) IN (SELECT (shard, xfer) FROM tui_slot_xfers)"
                       " OR (pair_shard, pair_xfer) IN (SELECT (shard, xfer) FROM tui_slot_xfers))")
            conds["slot"] = (sql, params)
        if self.text:
            conds["text"] = ("concat_ws(' ', agent, kind, request, pool, peer, status, detail, "
                             "CAST(msg AS VARCHAR)) ILIKE ?", [f"%{self.text}%"])
        sql = " AND ".join(c for c, _ in conds.values()) or "TRUE"
        return sql, [p for _, ps in conds.values() for p in ps]


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
