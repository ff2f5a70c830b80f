"""per-pool-slot-count: index each region of a prepared descriptor list with its own
slot count (the fix of SGLang's ``_num_slots_src = kv_data_lens[0] // kv_item_lens[0]``).

A prepared list stacks regions (one per pool layer) region after region; slot ``s`` of
region ``r`` is entry ``offset(r) + s``, where ``offset`` adds up the slot counts of the
regions before it. The buggy program computes ``r * M + s`` with M the first region's
slot count. Regions are read from the recorded list itself: consecutive entries of one
(pool, layer) of the layouts (or, without layouts, one contiguous run of equal entries).

Which indexing a program used is read from its descriptors, per pair of lists: the one
under which more descriptors have source and destination in the same region, backed by
the alloc hooks (both slots held by the transfer's request, same page on both sides).
A pair indexed ``r * M + s`` is re-indexed ``offset(r) + s`` on both sides; a pair
already indexed per region is left as recorded (the fix changes nothing there).
"""
from __future__ import annotations

import bisect
import collections
import dataclasses

from ..memory import pair_pieces
from ...errors import UsageError

NAME = "per-pool-slot-count"
SUMMARY = "index every region of a prepped list with its own slot count (offset(r) + slot, not r * M + slot)"


@dataclasses.dataclass
class _List:
    addr: list
    nbytes: list
    starts: list                    # first entry of each region
    counts: list                    # entries of each region
    labels: list                    # (pool, layer) of each region (None without layouts)
    agent: str

    def region(self, idx: int):
        """(region, slot) of an entry as recorded (per-region offsets)."""
        r = bisect.bisect_right(self.starts, idx) - 1
        return (r, idx - self.starts[r]) if 0 <= r and idx < self.starts[r] + self.counts[r] else None

    def label(self, r: int):
        return self.labels[r]


def _lists(g, shard: str) -> dict[int, _List]:
    t = g.dlists_tables.get(shard)
    if t is None or not t.num_rows:
        return {}
    rows = collections.defaultdict(list)
    for r in t.to_pylist():
        rows[r["dlist"]].append(r)
    out = {}
    for did, rs in rows.items():
        rs.sort(key=lambda r: r["idx"])
        if [r["idx"] for r in rs] != list(range(len(rs))):
            continue                    # not a dense prepared list: leave it alone
        labels = [_label(g, r) for r in rs]
        starts, counts = [], []
        for i, r in enumerate(rs):
            same = i and labels[i] == labels[i - 1] and (
                labels[i] is not None or (r["nbytes"] == rs[i - 1]["nbytes"]
                                          and r["addr"] == rs[i - 1]["addr"] + rs[i - 1]["nbytes"]))
            if same:
                counts[-1] += 1
            else:
                starts.append(i)
                counts.append(1)
        out[did] = _List([r["addr"] for r in rs], [r["nbytes"] for r in rs], starts, counts,
                         [labels[i] for i in starts], rs[0]["agent"])
    return out


def _label(g, row):
    """(pool, layer) of a list entry by the layouts, None without one."""
    ps = g.mem.pieces(row["agent"], row["addr"], row["nbytes"] or 1)
    if not ps:
        return None
    c = g.mem.cells[ps[0][0]]
    return None if c.pool is None else (c.pool, c.layer)


def apply(edit, args: str | None) -> None:
    if args:
        raise UsageError(f"--what-if {NAME} takes no arguments")
    g = edit.graph
    by_xfer = collections.defaultdict(dict)     # (shard, xfer) -> pos -> desc row
    groups = collections.defaultdict(list)      # (shard, src list, dst list) -> desc rows
    for shard, t in g.descs_tables.items():
        if t is None or not t.num_rows:
            continue
        for r in t.to_pylist():
            if r["src_dlist"] is None or r["dst_dlist"] is None or r["src_idx"] is None or r["dst_idx"] is None:
                continue
            by_xfer[(shard, r["xfer"])][r["pos"]] = r
            groups[(shard, r["src_dlist"], r["dst_dlist"])].append(r)
    if not groups:
        edit.note("no prepared descriptor lists in the trace: nothing to re-index")
        return
    lists = {s: _lists(g, s) for s in {k[0] for k in groups}}
    req_of = {(t.shard, t.xfer): t.request for t in g.transfers}
    held = _holdings(g)
    new_desc: dict[tuple, tuple] = {}           # (shard, xfer, pos) -> (src_addr, dst_addr, nbytes)
    fixed_pairs = 0
    for (shard, sl, dl), rows in groups.items():
        src, dst = lists[shard].get(sl), lists[shard].get(dl)
        if src is None or dst is None or (src.counts == [src.counts[0]] * len(src.counts)
                                          and dst.counts == [dst.counts[0]] * len(dst.counts)):
            continue                    # every region the same size: both indexings agree
        agree_rec = agree_uni = 0
        picks = []
        for r in rows:
            req = req_of.get((shard, r["xfer"]))
            a, b = src.region(r["src_idx"]), dst.region(r["dst_idx"])
            if a and b and a[0] == b[0]:
                agree_rec += 1 + _held(src, dst, a[0], a[1], b[1], req, held)
            p = _uniform(src, dst, r, req, held)
            agree_uni += 0 if p is None else 1 + p[2]
            picks.append(p and p[:2])
        if agree_uni <= agree_rec:
            continue
        fixed_pairs += 1
        for r, p in zip(rows, picks):
            if p is None:
                continue
            si, di = p
            n = min(src.nbytes[si], dst.nbytes[di])
            new_desc[(shard, r["xfer"], r["pos"])] = (src.addr[si], dst.addr[di], n)
    if not new_desc:
        edit.note("every prepared list is already indexed with each region's own slot count: nothing changes")
        return
    changed_xfers = changed_descs = 0
    for ti, t in enumerate(g.transfers):
        descs, hit = [], 0
        for d in t.descs:
            nd = new_desc.get((t.shard, t.xfer, d[0]))
            if nd is not None and (nd[0], nd[1], nd[2]) != (d[3], d[5], d[6]):
                d = (d[0], d[1], d[2], nd[0], d[4], nd[1], nd[2])
                hit += 1
            descs.append(d)
        if not hit:
            continue
        changed_xfers += 1
        changed_descs += hit
        resolved, oob = [], []
        for d in descs:
            sp, dp = g.mem.pieces(d[2], d[3], d[6]), g.mem.pieces(d[4], d[5], d[6])
            if sp is None or dp is None:
                oob.append(d[0])
            else:
                resolved.append(pair_pieces(sp, dp))
        k = len(t.chunks)
        for c, m in enumerate(t.chunks):
            part = resolved[c * len(resolved) // k:(c + 1) * len(resolved) // k]
            edit.set_pieces(m, [p for ps in part for p in ps])
        edit.set_transfer(ti, dataclasses.replace(t, descs=descs, out_of_bounds=oob))
    edit.note(f"re-indexed {changed_descs} descriptor(s) of {changed_xfers} transfer(s) on {fixed_pairs} pair(s) "
              "of prepared lists indexed with the first region's slot count")


def _holdings(g) -> dict:
    """(agent, pool, slot) -> {(request, page)} from the alloc hooks (empty without them)."""
    out = collections.defaultdict(set)
    c = g.col
    for op in range(g.n_prog):
        if c["kind"][op] == "alloc":
            pages = c["pages"][op] or [None] * len(c["slots"][op] or [])
            for s, p in zip(c["slots"][op] or [], pages):
                out[(c["agent"][op], c["pool"][op], s)].add((c["request"][op], p))
    return out


def _held(src: _List, dst: _List, r: int, s1: int, s2: int, request, held) -> int:
    """How well the alloc hooks back reading slot ``s1`` / ``s2`` of region ``r`` as the
    request's data: its source slot held by it, its destination slot held by it, and the
    same page on both sides (0..3; 0 without hooks)."""
    if request is None or not src.labels[r] or not dst.labels[r]:
        return 0
    a = {p for q, p in held.get((src.agent, src.labels[r][0], s1), ()) if q == request}
    b = {p for q, p in held.get((dst.agent, dst.labels[r][0], s2), ()) if q == request}
    return bool(a) + bool(b) + bool((a & b) - {None})


def _uniform(src: _List, dst: _List, row: dict, request, held):
    """(source entry, destination entry, hook score) a descriptor meant when its indices
    were computed ``r * M + s`` on both sides, or None when no region fits both.

    ``r * M + s`` is ambiguous once a region holds more than M slots, so every region
    that fits both indices is a candidate; the alloc hooks pick the one whose slots the
    transfer's request holds (same page on both sides), else the first."""
    best = None
    ms, md = src.counts[0], dst.counts[0]
    for r in range(min(len(src.counts), len(dst.counts))):
        s1, s2 = row["src_idx"] - r * ms, row["dst_idx"] - r * md
        if not (0 <= s1 < src.counts[r] and 0 <= s2 < dst.counts[r]):
            continue
        score = _held(src, dst, r, s1, s2, request, held)
        if best is None or score > best[2]:
            best = (src.starts[r] + s1, dst.starts[r] + s2, score)
    return best
