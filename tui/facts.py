"""What the side panels show at the cursor's moment: slot owners, transfers in flight,
a transfer's descriptors resolved to (pool, layer, slot, offset) and its events.

Every fact comes from the trace model (kvtrace.model): owners are its holdings, a
transfer's ends its descriptor ends, whether a descriptor is right its desc_match (the
view the layer_offset_mismatch check reads), and the order its timeline. Every query
reads only the rows it needs (one pool's holdings, one transfer's descriptors), so the
panels stay fast on a 10M-event trace. Each method takes its own DuckDB cursor, so
panels may refresh from worker threads.
"""
from __future__ import annotations

import dataclasses
import enum
import threading

from .queries import sql_text
from .source import OrdReader

DESC_LIMIT = 500


class XferState(str, enum.Enum):
    """A transfer's state at the cursor's moment."""

    NOT_POSTED = "not posted yet"
    IN_FLIGHT = "in flight"
    DONE = "done"
    NOTIFIED = "notified (target side)"
    ERROR = "error"
    RELEASED = "released"


@dataclasses.dataclass
class SlotCell:
    """One slot of the slot map."""

    slot: int
    owners: list[str] = dataclasses.field(default_factory=list)
    shared: bool = False
    xfer_in: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)   # (shard, xfer, request)
    xfer_out: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    hazard: str | None = None


@dataclasses.dataclass
class TransferView:
    """The transfer inspector's content."""

    shard: str
    xfer: int
    post: dict | None
    events: list[dict]
    descs: list[dict]
    ndescs: int
    state: XferState

    @property
    def mismatches(self) -> int:
        return sum(1 for d in self.descs if desc_problem(d))


def desc_problem(d: dict) -> str | None:
    """Why a resolved descriptor is wrong (None when it is right, or when the rule does
    not apply, e.g. an end outside every layout): the model's desc_match.problem."""
    return d.get("problem")


#: slots the slot map shows at most (a real pool per layer has thousands; a hostile trace
#: may claim 2**63)
MAX_SLOT_CELLS = 1 << 16


class Facts:
    """Queries for the slot map and the transfer inspector over a TimelineSource."""

    def __init__(self, source):
        self.source = source
        self._pools = None
        self._local = threading.local()

    def _reader(self):
        # panels run in worker threads (an exclusive worker's predecessor may still be
        # finishing): one reader per thread, as OrdReader is not thread-safe
        r = getattr(self._local, "reader", None)
        if r is None:
            r = self._local.reader = OrdReader(self.source.events_path)
        return r

    def _cur(self):
        self.source.wait_ready()   # in a worker: the panels' tables may still be building
        return self.source.con.cursor()

    def pools(self) -> list[tuple[str, str, int, int]]:
        """(agent, pool, num_slots, layers) of every pool the slot map can show."""
        if self._pools is None:
            self._pools = [tuple(r) for r in self._cur().execute(sql_text("pools")).fetchall()]
        return self._pools

    def slot_map(self, agent: str, pool: str, ord_: int, num_slots: int,
                 hazard_slots: dict[int, str] | None = None) -> list[SlotCell]:
        """Every slot of (agent, pool) as it stands once event ``ord_`` has happened (the
        first MAX_SLOT_CELLS: a trace's slot count or slot numbers may be anything)."""
        cells = [SlotCell(s) for s in range(max(0, min(int(num_slots or 0), MAX_SLOT_CELLS)))]
        cur = self._cur()

        def cell(s):
            if s is None or not 0 <= s < MAX_SLOT_CELLS:
                return SlotCell(-1)   # beyond what the map shows: counted nowhere
            while s >= len(cells):
                cells.append(SlotCell(len(cells)))
            return cells[s]
        for slot, request, _refs, shared in cur.execute(sql_text("slot_owners"),
                                                        [agent, pool, ord_]).fetchall():
            c = cell(slot)
            c.owners.append(request)
            c.shared |= bool(shared)
        for shard, xfer, request, d, slot, _layer in cur.execute(sql_text("inflight"),
                                                                        [ord_, agent, pool]).fetchall():
            c = cell(slot)
            lst = c.xfer_in if d == "in" else c.xfer_out
            if (shard, xfer, request) not in lst:
                lst.append((shard, xfer, request))
        for c in cells:
            # at this moment: bytes still moving into / out of a slot its request no longer holds
            for shard, xfer, request in c.xfer_in + c.xfer_out:
                if request is not None and request not in c.owners:
                    side = "into" if (shard, xfer, request) in c.xfer_in else "out of"
                    holder = f"held by {', '.join(c.owners)}" if c.owners else "free"
                    c.hazard = f"transfer {shard}#{xfer} of {request} still moving {side} a slot {holder}"
            if c.hazard is None and hazard_slots and c.slot in hazard_slots:
                c.hazard = hazard_slots[c.slot]
        return cells

    def transfer(self, shard: str, xfer: int, ord_: int) -> TransferView:
        """The transfer (shard, xfer) with its events, resolved descriptors and state at ``ord_``."""
        cur = self._cur()
        got = cur.execute(sql_text("xfer_ords"), [shard, xfer]).fetchone()
        events = self._reader().by_ord(got[0] if got else [])
        post = next((e for e in events if e["kind"] == "xfer_post"), None)
        res = cur.execute(sql_text("xfer_descs"), [shard, xfer, DESC_LIMIT])
        names = [d[0] for d in res.description]
        descs = [dict(zip(names, r)) for r in res.fetchall()]
        ndescs = cur.execute(sql_text("xfer_ndescs"), [shard, xfer]).fetchone()[0]
        return TransferView(shard, xfer, post, events, descs, ndescs, state_at(events, ord_))


def state_at(events: list[dict], ord_: int) -> XferState:
    """A transfer's state once event ``ord_`` has happened (latest fact wins)."""
    state = XferState.NOT_POSTED
    for e in events:
        if e["ord"] > ord_:
            break
        k = e["kind"]
        if k == "xfer_post":
            state = XferState.IN_FLIGHT
        elif k == "xfer_done":
            state = XferState.DONE
        elif k == "xfer_error":
            state = XferState.ERROR
        elif k == "xfer_release" and state is XferState.IN_FLIGHT:
            state = XferState.RELEASED
        elif k == "notif_recv" and state is XferState.IN_FLIGHT:
            state = XferState.NOTIFIED
    return state


def xfer_key(row: dict | None) -> tuple[str, int] | None:
    """The transfer an event belongs to: its own (shard, xfer), or a notification's post."""
    if not row:
        return None
    if row.get("xfer") is not None:
        return row["shard"], row["xfer"]
    if row.get("pair_xfer") is not None:
        return row["pair_shard"], row["pair_xfer"]
    return None
