"""Transfers and cross-shard pairing: what each posting moves, and who observes it.

A move waits for its post; a completion observation (``xfer_done``/``xfer_error`` on
the initiator, the paired ``notif_recv`` on the target) waits for every move of its
transfer. Which send a receive pairs with is the trace model's ``sync_pairs`` (the same
pairs the checks and the TUI use); replay only turns them into waits. Descriptors
outside the re-created memory are listed, never moved.
"""
from __future__ import annotations

import dataclasses
import json

from .memory import pair_pieces


@dataclasses.dataclass
class Transfer:
    """One posting: who, what, where its bytes go, and what observes its completion."""
    shard: str
    xfer: int
    agent: str
    peer: str | None
    request: str | None
    post: int                       # op id of the xfer_post
    chunks: list[int]               # move op ids
    observers: list[int]            # op ids that observe completion
    t_post: int
    duration_ns: int | None         # from telemetry in the xfer_done detail
    descs: list[tuple]              # (pos, op, src_agent, src_addr, dst_agent, dst_addr, nbytes)
    out_of_bounds: list[int]        # desc positions outside the re-created memory (never run)
    deadline_t: int | None = None   # recorded time of the first observation



def detail(s) -> dict:
    """An event's JSON detail as a dict ({} when absent or not an object)."""
    if not s:
        return {}
    try:
        d = json.loads(s)
        return d if isinstance(d, dict) else {}
    except ValueError:
        return {}


def transfers(col, n, descs_by, mem, chunks, fault, waits, notes, pairs, op_of, ends):
    """The transfers of the trace with their moves, and the waits between posts, moves,
    observations and paired receives (``pairs``: the model's pairs query as columns;
    ``op_of``: (shard, seq) → op id; ``ends``: the model's descriptor ends in slots,
    (shard, xfer, pos, side) → [(pool, layer, slot, offset, nbytes)], one per slot)."""
    transfers: list[Transfer] = []
    by_key: dict[tuple, Transfer] = {}
    move_xfer, move_pieces = [], []
    for op in range(n):
        k = col["kind"][op]
        if k == "xfer_post":
            sh, x = col["shard"][op], col["xfer"][op]
            descs = sorted(descs_by.get((sh, x), []))
            t = Transfer(sh, x, col["agent"][op], col["peer"][op], col["request"][op], op, [], [],
                         col["t_ns"][op] or 0, None, descs, [])
            ti = len(transfers)
            transfers.append(t)
            by_key[(sh, x)] = t
            resolved = []
            for d in descs:
                sp = _pieces(mem, ends.get((sh, x, d[0], "src")), d[2], d[3], d[6])
                dp = _pieces(mem, ends.get((sh, x, d[0], "dst")), d[4], d[5], d[6])
                if sp is None or dp is None:
                    t.out_of_bounds.append(d[0])
                else:
                    resolved.append(pair_pieces(sp, dp))
            k_chunks = max(1, min(chunks, len(resolved)))
            for c in range(k_chunks):
                part = resolved[c * len(resolved) // k_chunks:(c + 1) * len(resolved) // k_chunks]
                t.chunks.append(n + len(move_xfer))
                move_xfer.append(ti)
                move_pieces.append([p for ps in part for p in ps])
        elif k in ("xfer_done", "xfer_error"):
            t = by_key.get((col["shard"][op], col["xfer"][op]))
            if t is None:
                continue
            t.observers.append(op)
            if t.duration_ns is None:
                tel = detail(col["detail"][op]).get("telemetry") or {}
                if "xfer_us" in tel:
                    t.duration_ns = int(1000 * ((tel.get("post_us") or 0) + tel["xfer_us"]))
    # moves wait for their post; observers wait for every move (data before observation)
    waits.extend([t_post] for t_post in (transfers[ti].post for ti in move_xfer))
    for t in transfers:
        for o in t.observers:
            waits[o].extend(t.chunks)
    _pair_waits(col, pairs, op_of, by_key, fault, waits)
    for t in transfers:
        ts = [col["t_ns"][o] for o in t.observers if col["t_ns"][o] is not None]
        t.deadline_t = min(ts) if ts else None
        if t.out_of_bounds:
            notes.append(f"xfer {t.shard}:{t.xfer} ({t.request}): {len(t.out_of_bounds)} descriptor(s) "
                         f"outside the re-created memory — reported, never executed")
    return transfers, move_xfer, move_pieces


def _pieces(mem, end, agent, addr, nbytes):
    """A descriptor end as cell pieces: the slot cells the model placed it in (one per
    slot of a run), else the memory map's cut (ranges outside every layout)."""
    if end is not None:
        cells = [mem.slot_cell(agent, pool, layer, slot) for pool, layer, slot, _, _ in end]
        if None not in cells:
            return [(c, off, n) for c, (_, _, _, off, n) in zip(cells, end)]
    return mem.pieces(agent, addr, nbytes)


def _pair_waits(col, pairs, op_of, by_key, fault, waits) -> None:
    """Every receive waits for the send it pairs with; a notification of a transfer is one
    of its completion observations, so it also waits for the transfer's moves (or, under
    notify-before-data, the moves wait for it)."""
    for ss, sq, sk, sx, rs, rq in zip(*(pairs[c] for c in ("send_shard", "send_seq", "send_kind", "send_xfer",
                                                              "recv_shard", "recv_seq"))):
        s, r = op_of.get((ss, sq)), op_of.get((rs, rq))
        if s is None or r is None:
            continue
        waits[r].append(s)
        t = by_key.get((ss, sx)) if sk == "xfer_post" else None
        if t is None:
            continue
        t.observers.append(r)
        if fault == "notify-before-data":
            for c in t.chunks:       # the data lands only after the notification
                waits[c].append(r)
        else:
            waits[r].extend(t.chunks)
