"""free-after-done: a slot goes back to its pool only once a completion of every
transfer that used it has been observed.

The recorded program may free a page while a transfer reading or writing it is still
in flight (freed at hand-off, on abort, on a message that does not follow the data).
Under the fix the free waits for the completion; the allocator meanwhile hands the
next holder another page. Re-derived here per slot: the holdings of a slot (alloc to
last free; a prefix-cache share continues one) are ordered, each transfer belongs to
the holding of its own request that happened before its post, and a holding that
starts before every transfer of the earlier holdings was observed complete
(happens-before, never clocks) is moved to a fresh copy of the slot, with its writes,
reads and transfers. Holdings that started after the completions keep their slot.

ARGS: ``pools=kv,index_k`` limits the fix to those pools.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import json

from ...errors import UsageError

NAME = "free-after-done"
SUMMARY = "delay each free until a completion of every transfer using the slot is observed"


@dataclasses.dataclass
class _Holding:
    start: int                      # op id of the alloc that began it
    holders: set
    transfers: list = dataclasses.field(default_factory=list)
    fresh: bool = False


def _parse(args: str | None):
    if not args:
        return None
    k, _, v = args.partition("=")
    if k != "pools" or not v:
        raise UsageError(f"--what-if {NAME}:{args}: expected pools=POOL[,POOL]")
    return set(v.split(","))


def _shared(detail) -> bool:
    if not detail or "shared" not in detail:
        return False
    try:
        return bool(json.loads(detail).get("shared"))
    except ValueError:
        return False


def apply(edit, args: str | None) -> None:
    g = edit.graph
    pools = _parse(args)
    col = g.col
    # holdings of every slot (agent, pool, slot), in recorded order
    holdings: dict[tuple, list[_Holding]] = collections.defaultdict(list)
    refs: dict[tuple, int] = collections.defaultdict(int)
    for op in range(g.n_prog):
        k = col["kind"][op]
        if k not in ("alloc", "free") or (pools and col["pool"][op] not in pools):
            continue
        for s in col["slots"][op] or []:
            key = (col["agent"][op], col["pool"][op], s)
            if k == "alloc":
                hs = holdings[key]
                if refs[key] == 0 and not (_shared(col["detail"][op]) and hs):
                    hs.append(_Holding(op, set()))
                hs[-1].holders.add(col["request"][op])
                refs[key] += 1
            else:
                refs[key] = max(0, refs[key] - 1)
    if not holdings:
        edit.note("no alloc/free events of slots (recorded without hooks?): nothing to delay")
        return
    hb = edit.hb
    shard = col["shard"]
    starts = {key: [h.start for h in hs] for key, hs in holdings.items()}

    def key_of(cell):
        c = edit.cell(cell)
        return None if c.pool is None else (c.agent, c.pool, c.slot)

    # each transfer joins, per slot it touches, the holding it belongs to
    for ti, t in enumerate(g.transfers):
        keys = {key_of(c) for m in t.chunks for p in edit.pieces(m) for c in (p[0], p[2])}
        for key in keys:
            hs = holdings.get(key)
            if not hs:
                continue
            before = [h for h in hs if (shard[h.start] == shard[t.post] and h.start < t.post)
                      or hb.before(h.start, t.post)]
            if not before:
                continue
            own = [h for h in before if t.request in h.holders]
            (own or before)[-1].transfers.append(ti)

    def observed(ti: int, op: int) -> bool:
        return hb.any_before(g.transfers[ti].observers, op)

    moved = collections.Counter()
    for key, hs in holdings.items():
        pending: list[int] = []          # transfers of holdings still on the slot itself
        for i, h in enumerate(hs):
            if i:
                pending = [ti for ti in pending if not observed(ti, h.start)]
                h.fresh = bool(pending)
            if not h.fresh:
                pending.extend(h.transfers)
            else:
                moved[key[1]] += 1
    if not moved:
        edit.note("every free already followed the completion of the transfers using its slot: nothing changes")
        return

    fresh_cell: dict[tuple, int] = {}

    def remap(cell, key, hi):
        if cell is None:
            return cell
        k2 = (cell, hi)
        if k2 not in fresh_cell:
            fresh_cell[k2] = edit.new_cell(cell)
        return fresh_cell[k2]

    def holding_at(key, op):
        i = bisect.bisect_right(starts[key], op) - 1
        return i if i >= 0 and shard[holdings[key][i].start] == shard[op] else None

    for op in range(g.n_prog):
        cells = g.cells[op]
        if not cells:
            continue
        new, changed = [], False
        for c in cells:
            key = None if c is None else key_of(c)
            hi = holding_at(key, op) if key in holdings else None
            if hi is not None and holdings[key][hi].fresh:
                new.append(remap(c, key, hi))
                changed = True
            else:
                new.append(c)
        if changed:
            edit.set_cells(op, new)
    for key, hs in holdings.items():
        for hi, h in enumerate(hs):
            if not h.fresh:
                continue
            for ti in h.transfers:
                for m in g.transfers[ti].chunks:
                    ps = edit.pieces(m)
                    new = [(remap(sc, key, hi) if key_of(sc) == key else sc, so,
                            remap(dc, key, hi) if key_of(dc) == key else dc, do, n) for sc, so, dc, do, n in ps]
                    if new != ps:
                        edit.set_pieces(m, new)
    total = sum(moved.values())
    per = ", ".join(f"{p} {n}" for p, n in sorted(moved.items()))
    edit.note(f"{total} page holding(s) began before a transfer using the page's previous holder was observed "
              f"complete ({per}); with the fix those frees wait for the completion and the next holder gets "
              f"another page")
