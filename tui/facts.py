"""What the side panels show at the cursor's moment: slot owners, transfers in flight,
a transfer's descriptors resolved to (pool, layer, slot, offset) and its events.

Every query reads only the rows it needs (one pool's ownership history, one transfer's
descriptors), so the panels stay fast on a 10M-event trace. Each method takes its own
DuckDB cursor, so panels may refresh from worker threads.
"""
from __future__ import annotations

import dataclasses
import enum
import threading

from .order import sql_text
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
    """Why a resolved descriptor looks wrong (None when both ends agree)."""
    if d["src_pool"] is None or d["dst_pool"] is None:
        return "outside every layout" if d["src_pool"] is None and d["dst_pool"] is None else (
            "source outside every layout" if d["src_pool"] is None else "destination outside every layout")
    if d["src_pool"] != d["dst_pool"]:
        return "pools differ"
    if d["src_layer"] != d["dst_layer"]:
        return "layers differ"
    held = d.get("held") or set()
    for side in ("src", "dst"):
        if (d[f"{side}_agent"], d[f"{side}_pool"]) in held and d.get(f"{side}_page") is None:
            return f"{'source' if side == 'src' else 'destination'} slot not held by the request"
    if d.get("src_page") is not None and d.get("dst_page") is not None and d["src_page"] != d["dst_page"]:
        return f"pages differ (p{d['src_page']} → p{d['dst_page']})"
    if d["src_off"] or d["dst_off"]:
        return "not slot-aligned"
    if d["src_off"] + d["nbytes"] > d["src_slot_bytes"] or d["dst_off"] + d["nbytes"] > d["dst_slot_bytes"]:
        return "crosses a slot boundary"
    return None


class Facts:
    """Queries for the slot map and the transfer inspector over a TimelineSource."""

    def __init__(self, source):
        self.source = source
        self.slots_path = source.paths["tui_slots"].replace("'", "''")
        self.xfers_path = source.paths["tui_xfers"].replace("'", "''")
        self._pools = None
        self._local = threading.local()

    def _reader(self):
        # panels run in worker threads (an exclusive worker's predecessor may still be
        # finishing): one reader per thread, as OrdReader is not thread-safe
        r = getattr(self._local, "reader", None)
        if r is None:
            r = self._local.reader = OrdReader(self.source.paths["tui_events"])
        return r

    def _cur(self):
        return self.source.con.cursor()

    def pools(self) -> list[tuple[str, str, int, int]]:
        """(agent, pool, num_slots, layers) of every pool the slot map can show."""
        if self._pools is None:
            self._pools = [tuple(r) for r in self._cur().execute(sql_text("pools").format(slots=self.slots_path)).fetchall()]
        return self._pools

    def slot_map(self, agent: str, pool: str, ord_: int, num_slots: int,
                 hazard_slots: dict[int, str] | None = None) -> list[SlotCell]:
        """Every slot of (agent, pool) as it stands once event ``ord_`` has happened."""
        cells = [SlotCell(s) for s in range(num_slots)]
        cur = self._cur()

        def cell(s):
            while s >= len(cells):
                cells.append(SlotCell(len(cells)))
            return cells[s]
        for slot, request, _refs, shared in cur.execute(sql_text("slot_owners").format(slots=self.slots_path),
                                                        [agent, pool, ord_]).fetchall():
            c = cell(slot)
            c.owners.append(request)
            c.shared |= bool(shared)
        for shard, xfer, request, d, slot, _layer in cur.execute(sql_text("inflight").format(xfers=self.xfers_path),
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
        got = cur.execute(f"SELECT ords FROM read_parquet('{self.xfers_path}') WHERE shard = ? AND xfer = ?",
                          [shard, xfer]).fetchone()
        events = self._reader().by_ord(got[0] if got else [])
        post = next((e for e in events if e["kind"] == "xfer_post"), None)
        res = cur.execute(sql_text("xfer_descs").format(limit=DESC_LIMIT), [shard, xfer])
        names = [d[0] for d in res.description]
        descs = [dict(zip(names, r)) for r in res.fetchall()]
        if post is not None and post["request"] is not None:
            _add_pages(cur, descs, post["request"], post["ord"])
        ndescs = cur.execute("SELECT count(*) FROM descs WHERE shard = ? AND xfer = ?", [shard, xfer]).fetchone()[0]
        return TransferView(shard, xfer, post, events, descs, ndescs, state_at(events, ord_))


def _add_pages(cur, descs: list[dict], request: str, post_ord: int) -> None:
    """Give each descriptor end the page its slot holds for the request at the post
    (from the request's allocs), so a descriptor pairing different pages shows."""
    pages, held = {}, set()
    for agent, pool, slots, pgs in cur.execute(
            "SELECT agent, pool, slots, pages FROM tl WHERE request = ? AND kind = 'alloc' AND ord <= ?",
            [request, post_ord]).fetchall():
        held.add((agent, pool))
        for s, p in zip(slots or [], pgs or [None] * len(slots or [])):
            pages[(agent, pool, s)] = p
    for d in descs:
        d["held"] = held
        for side in ("src", "dst"):
            d[f"{side}_page"] = pages.get((d[f"{side}_agent"], d[f"{side}_pool"], d[f"{side}_slot"]))


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
