"""Synthetic PD trace generator for the analysis benchmark (vectorised: no per-event Python).

A clean pipelined WRITE-mode workload, two shards (prefill, decode), two pools per side
(`kv`: MLA-like, `index_k`: its own slot size and slot count) with per-layer regions and
prepped descriptor lists indexed with per-pool slot counts. Per request:

  decode : req_start, alloc kv, alloc index_k, msg_send(pages) ... later: notif_recv,
           read × (layers of both pools), free kv, free index_k, req_done
  prefill: msg_recv, alloc kv, alloc index_k, write × layers, xfer_post (+ descriptors:
           one per (pool, layer, page)), xfer_done, xfer_release, free kv, free index_k

Decode's tail of request i is interleaved after the head of request i + LAG (pipelining);
slots are reused by request i + CONC. Checksums are consistent (writes and reads agree),
so a correct analysis reports zero findings. ``--bug early-free`` makes every 97th
request free its prefill pages before xfer_done (a planted hazard).

    python bench/gen_synthetic.py OUT.kvtrace --events 10000000

Written CHUNK_REQUESTS requests at a time (the same bytes as one piece), so memory stays
bounded (~0.6 GB) at any --events: 100M events take ~2 min on one core.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute.if_else)
import pyarrow.ipc as ipc

from kvtrace.tracer import manifest
from kvtrace.tracer.schema import DESCS, DLISTS, EVENTS, LAYOUTS, SHARD_INFO

POOLS = (("kv", 8, 576 * 64 // 8, 2048), ("index_k", 8, 132 * 64 // 8, 4096))  # name, layers, slot_bytes, num_slots
PAGES, CONC, LAG = 2, 256, 8


#: requests generated and written at once: memory is bounded by this, not by --events
#: (~50 events per request; 100M events are written in 32 pieces of ~3M events)
CHUNK_REQUESTS = 65536


class _Stream:
    """One Arrow stream file written piece by piece (schema's columns missing from a
    piece are nulls)."""

    def __init__(self, path: str, schema: pa.Schema, batch: int = 65536) -> None:
        self.schema, self.batch = schema, batch
        self._sink = pa.OSFile(path, "wb")
        self._w = ipc.new_stream(self._sink, schema)

    def write(self, cols: dict) -> None:
        n = len(next(iter(cols.values())))
        arrays = [cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in self.schema]
        for b in pa.Table.from_arrays(arrays, schema=self.schema).to_batches(max_chunksize=self.batch):
            self._w.write_batch(b)

    def close(self) -> None:
        self._w.close()
        self._sink.close()


def _write(path: str, schema: pa.Schema, cols: dict, batch: int = 65536) -> None:
    s = _Stream(path, schema, batch)
    s.write(cols)
    s.close()


def _lists(values: np.ndarray, width: int, valid: np.ndarray, typ) -> pa.Array:
    """A list column: rows with ``valid`` get ``width`` consecutive values, others null."""
    n = len(valid)
    lens = np.where(valid, width, 0)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    mask = pa.array(~valid)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, typ), mask=mask)


def _checksum(req, pool_id, layer, page):
    """A stand-in for kvh64 of the provenance page: any pure function of its identity."""
    with np.errstate(over="ignore"):
        h = (req.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ (pool_id.astype(np.uint64) << np.uint64(48))
        h ^= layer.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + page.astype(np.uint64)
        return h * np.uint64(0x165667B19E3779F9)


def build(path: str, events: int, bug: str | None = None, seed: int = 0,
          chunk: int = CHUNK_REQUESTS) -> dict:
    """Write the trace, ``chunk`` requests at a time (the same bytes whatever the chunk);
    returns counts (events, descs, requests)."""
    L = [p[1] for p in POOLS]
    nl = sum(L)
    per_req = (7 + nl) + (8 + nl)
    R = max(CONC + LAG, events // per_req)
    os.makedirs(path, exist_ok=True)
    manifest.expect_shards(path, ["prefill", "decode"], tool="bench/gen_synthetic.py",
                           workload={"requests": R, "pages": PAGES, "concurrency": CONC})
    bases = {}
    for a, agent in enumerate(("prefill", "decode")):
        addr = 0x100000000 * (a + 1)
        for name, layers, sb, ns in POOLS:
            bases[(agent, name)] = addr
            addr += layers * sb * ns + 0x100000
    # slots: request i uses PAGES slots of block (i % CONC) in each pool, on both sides
    nev = 0
    for agent, side in (("prefill", _side_prefill), ("decode", _side_decode)):
        sh = _Shard(path, agent, bases)
        for lo in range(0, R, chunk):
            sh.write(side(R, lo, min(R, lo + chunk), bug))
        nev += sh.close()
    ndesc = _emit_descs(path, R, bases, chunk)
    manifest.finish(path)
    return {"events": nev, "descs": ndesc, "requests": R}


# ------------------------------------------------------------------ per-side event tables
def _template(parts):
    """parts: list of (kind, pool_id or -1, layer or -1); returns arrays."""
    k = np.array([p[0] for p in parts])
    return k, np.array([p[1] for p in parts]), np.array([p[2] for p in parts])


def _layers():
    return [(pi, layer) for pi, p in enumerate(POOLS) for layer in range(p[1])]


def _side_decode(R, lo, hi, bug=None):
    """Decode's rows of heads lo..hi-1 and of the tails that fall between them (requests
    lo-LAG..hi-LAG-1; the last piece also gets the final LAG tails)."""
    head = _template([("req_start", -1, -1), ("alloc", 0, -1), ("alloc", 1, -1), ("msg_send", -1, -1)])
    tail = _template([("notif_recv", -1, -1)] + [("read", pi, la) for pi, la in _layers()]
                     + [("free", 0, -1), ("free", 1, -1), ("req_done", -1, -1)])
    # order: head(i), then tail(i - LAG): keys 2i (head) and 2(i + LAG) + 1 (tail)
    span = len(head[0]) + len(tail[0])
    ih = np.arange(lo, hi)
    it = np.arange(max(0, lo - LAG), R if hi == R else max(0, hi - LAG))
    return _assemble([(head, ih, (2 * ih) * span), (tail, it, (2 * (it + LAG) + 1) * span)])


def _side_prefill(R, lo, hi, bug=None):
    body = [("msg_recv", -1, -1), ("alloc", 0, -1), ("alloc", 1, -1)] + [("write", pi, la) for pi, la in _layers()]
    clean = body + [("xfer_post", -1, -1), ("xfer_done", -1, -1), ("xfer_release", -1, -1), ("free", 0, -1), ("free", 1, -1)]
    t = _template(clean)
    i = np.arange(lo, hi)
    rows = _assemble([(t, i, i * len(t[0]))])
    if bug == "early-free":
        # every 97th request: move its frees before its xfer_done (swap rows within the request)
        n = len(t[0])
        r = np.arange(-(-lo // 97) * 97, hi, 97) - lo
        done = r * n + (n - 4)
        for k in ("kind", "pool", "layer", "req"):
            a = rows[k]
            a_done, a_f0, a_f1 = a[done].copy(), a[done + 2].copy(), a[done + 3].copy()
            a[done], a[done + 1], a[done + 2], a[done + 3] = a_f0, a_f1, a_done, a[done + 1].copy()
    return rows


def _assemble(pieces):
    """pieces: (template, its requests, each request's first position); rows in position order."""
    n = sum(len(t[0]) * len(reqs) for t, reqs, _ in pieces)
    kind = np.empty(n, dtype=object)
    pool = np.full(n, -1, np.int8)
    layer = np.full(n, -1, np.int32)
    reqs_ = np.empty(n, np.int64)
    order = np.empty(n, np.int64)
    at = 0
    for (k, p, la), reqs, start in pieces:
        m, R = len(k), len(reqs)
        sl = slice(at, at + m * R)
        kind[sl] = np.tile(k, R)
        pool[sl] = np.tile(p, R)
        layer[sl] = np.tile(la, R)
        reqs_[sl] = np.repeat(reqs, m)
        order[sl] = (start[:, None] + np.arange(m)[None, :]).reshape(-1)
        at += m * R
    o = np.argsort(order, kind="stable")
    return {"kind": kind[o], "pool": pool[o], "layer": layer[o], "req": reqs_[o]}


class _Shard:
    """One side's events.arrows (its registrations first, then the pieces in order), its
    layouts and its shard info."""

    def __init__(self, path, agent, bases):
        self.agent, self.peer = agent, ("decode" if agent == "prefill" else "prefill")
        self.d = os.path.join(path, agent)
        os.makedirs(self.d, exist_ok=True)
        self.out = _Stream(os.path.join(self.d, "events.arrows"), EVENTS)
        self.n = 0
        # registrations + layouts first (a prefix of 2 * layers register events)
        reg = [(agent, name, la, bases[(agent, name)] + la * sb * ns, sb * ns, sb, ns)
               for name, layers, sb, ns in POOLS for la in range(layers)]
        self.nreg = len(reg)
        self.out.write({
            "seq": pa.array(np.arange(len(reg), dtype=np.int64)), "t_ns": pa.array(np.zeros(len(reg), np.int64)),
            "agent": pa.array([agent] * len(reg), pa.string()), "kind": pa.array(["register"] * len(reg), pa.string()),
            "addr": pa.array([r[3] for r in reg], pa.uint64()), "nbytes": pa.array([r[4] for r in reg], pa.uint64()),
            "mem_type": pa.array(["DRAM"] * len(reg), pa.string()), "device": pa.array(np.zeros(len(reg), np.int32))})
        _write(os.path.join(self.d, "layouts.arrows"), LAYOUTS, {
            "agent": pa.array([r[0] for r in reg]), "pool": pa.array([r[1] for r in reg]),
            "layer": pa.array([r[2] for r in reg], pa.int32()), "addr": pa.array([r[3] for r in reg], pa.uint64()),
            "nbytes": pa.array([r[4] for r in reg], pa.uint64()), "slot_bytes": pa.array([r[5] for r in reg], pa.uint64()),
            "num_slots": pa.array([r[6] for r in reg], pa.int64()), "page_tokens": pa.array([64] * len(reg), pa.int32()),
            "dtype": pa.array(["bf16"] * len(reg))})

    def write(self, rows) -> None:
        kind = rows["kind"].astype(str)
        n, at = len(kind), self.n
        self.n += n
        req = rows["req"]
        pool_id, layer = rows["pool"], rows["layer"]
        names = np.array([p[0] for p in POOLS] + [None], dtype=object)
        is_slot = np.isin(kind, ["alloc", "free", "write", "read"])
        slot0 = (req % CONC) * PAGES
        vals = (slot0[is_slot][:, None] + np.arange(PAGES)[None, :]).reshape(-1)
        has_ck = np.isin(kind, ["write", "read"])
        ck_rows = np.nonzero(has_ck)[0]
        ck = _checksum(np.repeat(req[ck_rows], PAGES), np.repeat(pool_id[ck_rows], PAGES),
                       np.repeat(layer[ck_rows], PAGES), np.tile(np.arange(PAGES), len(ck_rows)))
        has_page = np.isin(kind, ["alloc", "write", "read"])
        pg_vals = np.tile(np.arange(PAGES), has_page.sum())
        r0 = int(req.min())
        rix = pa.array(req - r0)
        span = range(r0, int(req.max()) + 1)
        reqnames = pa.array([f"r{i}" for i in span], pa.string())
        xferish = np.isin(kind, ["xfer_post", "xfer_done", "xfer_release"])
        msgish = (kind == "xfer_post") | (kind == "notif_recv")
        msgs = pa.array([f"r{i}_kv".encode() for i in span], pa.binary())
        ids = pa.array([json.dumps({"id": f"r{i}/pages"}) for i in span], pa.string())
        detailish = (kind == "msg_send") | (kind == "msg_recv")
        cols = {
            "seq": pa.array(np.arange(at, at + n, dtype=np.int64) + 1000),
            "t_ns": pa.array(np.arange(at, at + n, dtype=np.int64) * 250),
            "thread": pa.array(np.zeros(n, np.int32)),
            "agent": pa.array(np.full(n, self.agent, dtype=object), pa.string()),
            "kind": pa.array(kind, pa.string()),
            "request": reqnames.take(rix),
            "pool": pa.array(names[np.where(pool_id < 0, len(POOLS), pool_id)], pa.string()),
            "layer": pa.array(layer, pa.int32(), mask=layer < 0),
            "slots": _lists(vals, PAGES, is_slot, pa.int64()),
            "pages": _lists(pg_vals, PAGES, has_page, pa.int64()),
            "checksums": _lists(ck, PAGES, has_ck, pa.uint64()),
            "xfer": pa.array(req, pa.int64(), mask=~xferish),
            "peer": pa.array(np.where(xferish | msgish | detailish, self.peer, None), pa.string()),
            # a post's size, as the recorders write it: the bytes of its descriptors
            "nbytes": pa.array(np.full(n, _post_bytes(), np.uint64), pa.uint64(), mask=kind != "xfer_post"),
        }
        cols["msg"] = pa.compute.if_else(pa.array(msgish), msgs.take(rix), pa.nulls(n, pa.binary()))
        cols["detail"] = pa.compute.if_else(pa.array(detailish), ids.take(rix), pa.nulls(n, pa.string()))
        self.out.write(cols)

    def close(self) -> int:
        self.out.close()
        d = self.d
        if self.agent == "decode":   # prefill's descs and dlists are written by _emit_descs
            _write(os.path.join(d, "descs.arrows"), DESCS, {"xfer": pa.array([], pa.int64())})
            _write(os.path.join(d, "dlists.arrows"), DLISTS, {"dlist": pa.array([], pa.int64())})
        with open(os.path.join(d, SHARD_INFO), "w") as f:
            json.dump({"pid": 0, "host": "synthetic", "clock": "monotonic_ns@synthetic", "closed": True,
                       "shard": self.agent, "events": self.n + self.nreg}, f)
        return self.n + self.nreg


#: the bytes one request's post moves: one descriptor per (pool, layer, page), a slot each
def _post_bytes() -> int:
    """A post's nbytes: its descriptors' (one per pool, layer and page; POOLS may be set by --layers)."""
    return PAGES * sum(sb * layers for _, layers, sb, _ in POOLS)


def _emit_descs(path, R, bases, chunk=CHUNK_REQUESTS):
    """Prefill's descriptors (one per pool, layer, page), ``chunk`` requests at a time,
    and its two prepped lists."""
    d = os.path.join(path, "prefill")
    regions = [(name, la, sb, ns) for name, layers, sb, ns in POOLS for la in range(layers)]
    starts = np.cumsum([0] + [r[3] for r in regions])[:-1]
    per = len(regions) * PAGES
    out = _Stream(os.path.join(d, "descs.arrows"), DESCS)
    total = 0
    for lo in range(0, R, chunk):
        reqs = np.arange(lo, min(R, lo + chunk), dtype=np.int64)
        slot0 = (reqs % CONC) * PAGES
        xfer = np.repeat(reqs, per)
        reg_i = np.tile(np.repeat(np.arange(len(regions)), PAGES), len(reqs))
        page = np.tile(np.arange(PAGES), len(reqs) * len(regions))
        slot = np.repeat(slot0, per) + page
        sb = np.array([r[2] for r in regions], np.uint64)[reg_i]
        ns = np.array([r[3] for r in regions], np.uint64)[reg_i]
        lay = np.array([r[1] for r in regions], np.uint64)[reg_i]
        pbase = np.array([bases[("prefill", r[0])] for r in regions], np.uint64)[reg_i]
        dbase = np.array([bases[("decode", r[0])] for r in regions], np.uint64)[reg_i]
        off = lay * sb * ns + slot.astype(np.uint64) * sb
        idx = starts[reg_i] + slot
        n = len(xfer)
        total += n
        out.write({
            "xfer": pa.array(xfer), "pos": pa.array(np.tile(np.arange(per, dtype=np.int32), len(reqs))),
            "op": pa.array(np.full(n, "WRITE", dtype=object), pa.string()),
            "src_agent": pa.array(np.full(n, "prefill", dtype=object), pa.string()), "src_addr": pa.array(pbase + off),
            "src_device": pa.array(np.zeros(n, np.int32)),
            "dst_agent": pa.array(np.full(n, "decode", dtype=object), pa.string()), "dst_addr": pa.array(dbase + off),
            "dst_device": pa.array(np.zeros(n, np.int32)), "nbytes": pa.array(sb),
            "src_dlist": pa.array(np.zeros(n, np.int64)), "src_idx": pa.array(idx.astype(np.int64)),
            "dst_dlist": pa.array(np.ones(n, np.int64)), "dst_idx": pa.array(idx.astype(np.int64))})
    out.close()
    parts = {k: [] for k in ("dlist", "agent", "remote_agent", "idx", "addr", "nbytes")}
    for dl, (agent, remote) in enumerate((("prefill", None), ("decode", "decode"))):
        for (name, la, sbb, nss), st in zip(regions, starts):
            s = np.arange(nss)
            parts["dlist"].append(np.full(nss, dl, np.int64))
            parts["idx"].append(st + s)
            parts["addr"].append((bases[(agent, name)] + la * sbb * nss + s * sbb).astype(np.uint64))
            parts["nbytes"].append(np.full(nss, sbb, np.uint64))
            parts["agent"].append(np.full(nss, agent, dtype=object))
            parts["remote_agent"].append(np.full(nss, remote, dtype=object))
    _write(os.path.join(d, "dlists.arrows"), DLISTS, {
        "dlist": pa.array(np.concatenate(parts["dlist"])), "agent": pa.array(np.concatenate(parts["agent"]), pa.string()),
        "remote_agent": pa.array(np.concatenate(parts["remote_agent"]), pa.string()),
        "idx": pa.array(np.concatenate(parts["idx"]).astype(np.int64)), "addr": pa.array(np.concatenate(parts["addr"])),
        "nbytes": pa.array(np.concatenate(parts["nbytes"])), "device": pa.array(np.zeros(sum(map(len, parts["idx"])), np.int32))})
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--bug", choices=("early-free",), default=None)
    ap.add_argument("--layers", type=int, default=None,
                    help="layers of each pool (default 8; a real model has 32-80: more layout regions per agent, "
                         "more descriptors and events per request)")
    a = ap.parse_args()
    if a.layers is not None:
        if a.layers < 1:
            ap.error("--layers must be at least 1")
        global POOLS
        POOLS = tuple((name, a.layers, sb, ns) for name, _, sb, ns in POOLS)
    t = time.perf_counter()
    c = build(a.out, a.events, a.bug)
    print(f"{a.out}: {c['events']:,} events, {c['descs']:,} descriptors, {c['requests']:,} requests "
          f"in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
