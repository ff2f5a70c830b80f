"""Synthetic PD traces for tests, benchmarks and demos (written with tracer/builder.py).

``pd_workload`` scripts a prefill and a decode agent serving ``requests`` requests in
waves of ``concurrency``: decode allocates destination pages and sends their indices,
prefill writes its pages and posts one WRITE per request, completions are observed
(prefill ``xfer_done``, decode ``notif_recv``), decode reads and both sides free. The
recording is clean (the builder models data moving at post). ``bug`` injects:

* ``early-src-free`` — prefill frees its source pages right after the post, and the
  next wave's requests reuse them before the transfer is observed done;
* ``uniform-slot-count`` — the ``index_k`` pool (own slot count) is addressed with the
  ``kv`` pool's slot count, ``layer * M_kv + page``, through prepped lists.
"""
from __future__ import annotations

from ..tracer.builder import TraceBuilder


class _Alloc:
    """A free list handing out the lowest free slots (reuse is immediate, like SGLang's)."""

    def __init__(self, n: int):
        self.free = list(range(n))

    def take(self, k: int) -> list[int]:
        if len(self.free) < k:
            raise ValueError("pool exhausted: raise num_slots or lower concurrency")
        self.free.sort()
        out, self.free = self.free[:k], self.free[k:]
        return out

    def give(self, slots) -> None:
        self.free.extend(slots)


def pd_workload(path: str, requests: int = 200, concurrency: int = 8, layers: int = 2, pages: int = 2,
                slot_bytes: int = 128, bug: str | None = None, index_k: bool = False) -> str:
    """Write a PD trace at ``path``; returns the path."""
    b = TraceBuilder(path, workload={"synth": "pd", "requests": requests, "concurrency": concurrency,
                                     "bug": bug})
    p, d = b.agent("prefill"), b.agent("decode")
    nslots = concurrency * pages * 2 + 4
    pools = ["kv"] + (["index_k"] if index_k or bug == "uniform-slot-count" else [])
    for side, extra in ((p, 0), (d, 3)):
        side.pool("kv", layers=layers, slot_bytes=slot_bytes, num_slots=nslots + extra)
        if len(pools) > 1:   # its own, smaller slot count (and page geometry)
            side.pool("index_k", layers=layers, slot_bytes=slot_bytes // 2, num_slots=nslots - 3 + extra)
    pa = {name: _Alloc(p.pools[name].num_slots) for name in pools}
    da = {name: _Alloc(d.pools[name].num_slots) for name in pools}
    if bug == "uniform-slot-count":
        m_src = p.pools["kv"].num_slots   # buffer 0's count applied to every buffer
        m_dst = d.pools["kv"].num_slots
    rids = [f"r{i}" for i in range(requests)]
    held, xs = {}, {}

    def admit(wave):
        for r in wave:
            d.req_start(r)
            dst = {name: da[name].take(pages) for name in pools}
            for name in pools:
                d.alloc(r, name, dst[name])
            d.msg_send(p, f"{r}/pages", request=r)
            p.req_start(r)
            p.msg_recv(d, f"{r}/pages", request=r)
            src = {name: pa[name].take(pages) for name in pools}
            for name in pools:
                p.alloc(r, name, src[name])
                p.write(r, name, src[name])
            held[r] = (src, dst)

    def send(wave):
        for r in wave:
            src, dst = held[r]
            xs[r] = []
            for name in pools:
                msg = f"{r}_{name}".encode()
                if bug == "uniform-slot-count" and name == "index_k":
                    descs = _uniform_descs(p.pools[name], d.pools[name], src[name], dst[name], m_src, m_dst)
                    xs[r].append(p.post(r, d, descs=descs, msg=msg))
                else:
                    xs[r].append(p.post(r, d, src=(name, src[name]), dst=(name, dst[name]), msg=msg))
                if bug == "early-src-free":   # the bug: sources go back before DONE is seen
                    p.free(r, name, src[name], reason="prefill-finished")
                    pa[name].give(src[name])

    def complete(wave):
        for r in wave:
            src, dst = held[r]
            for name, x in zip(pools, xs[r]):
                p.done(x, request=r)
                if bug != "early-src-free":
                    p.free(r, name, src[name], reason="done")
                    pa[name].give(src[name])
            p.req_done(r)
        for r in wave:
            src, dst = held.pop(r)
            for name in pools:
                d.notif_recv(p, f"{r}_{name}".encode(), request=r)
            for name in pools:
                d.read(r, name, dst[name])
                d.free(r, name, dst[name], reason="finished")
                da[name].give(dst[name])
            d.req_done(r)

    prev = None
    for w in range(0, requests, concurrency):   # pipelined: admit the next wave while
        wave = rids[w:w + concurrency]          # the previous one is still in flight
        admit(wave)
        if prev:
            complete(prev)
        send(wave)
        prev = wave
    if prev:
        complete(prev)
    b.close()
    return path


def _uniform_descs(sp, dp, src, dst, m_src, m_dst):
    """Descriptors of the uniform-slot-count bug: index ``layer * M + page`` into
    a prepped list whose entries are this pool's own (layer, slot) pairs."""
    def entry(pool, idx):
        layer, slot = divmod(idx, pool.num_slots)
        return pool.addr(layer, slot)
    out = []
    for layer in range(sp.layers):
        for s, t in zip(src, dst):
            out.append((entry(sp, layer * m_src + s), entry(dp, layer * m_dst + t), sp.slot_bytes))
    return out
