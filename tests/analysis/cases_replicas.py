"""Scenarios of replicated writes: several prefill TP ranks each WRITE their copy of one
request's metadata (SGLang's aux: output ids etc., identical on every rank) into the same
decode aux slot, posted from two processes with nothing ordering them. Whether the two
writes race depends on what they carry (overlapping_inflight_writes over view
inflight_writes): equal recorded checksums are no hazard, different ones are; with no
checksum of either source the finding is a warning when one request's writes come from two
source agents (replicas would be legal), an error across requests."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case

#: what each prefill rank's aux slot holds (a checksum as the hooks record it)
META, OTHER = 0xA11CE, 0xB0B


def _ranks(path, ranks=2):
    """Prefill TP ranks (one agent each) and one decode agent, each with a kv and an aux pool."""
    b = TraceBuilder(path)
    ps = [b.agent(f"prefill{i}") for i in range(ranks)]
    d = b.agent("decode")
    for a in (*ps, d):
        a.pool("kv", layers=2, slot_bytes=64, num_slots=8)
        a.pool("aux", layers=1, slot_bytes=64, num_slots=8)
    return b, ps, d


def _send_aux(path, reqs, dst_slots, checksums, aux_alloc=True):
    """Each rank i sends request reqs[i]'s KV (its own decode pages) and its aux slot (written
    with checksums[i]; None: no write of aux recorded, as SGLang's kv-only hooks) into
    decode's aux slot dst_slots[i]; decode reads once every notification arrived.
    ``aux_alloc=False``: no aux allocator is hooked (no ownership or page to check)."""
    b, ps, d = _ranks(path, len(reqs))
    for r in dict.fromkeys(reqs):
        d.req_start(r)
    kv = {}
    for i, (p, r) in enumerate(zip(ps, reqs)):
        kv[i] = [2 + 2 * i, 3 + 2 * i]
        d.alloc(r, "kv", kv[i], pages=[2 * i, 2 * i + 1])
        if aux_alloc and (r, dst_slots[i]) not in list(zip(reqs, dst_slots))[:i]:
            d.alloc(r, "aux", [dst_slots[i]])
        d.msg_send(p, f"{r}/pages/{i}", request=r)
        p.msg_recv(d, f"{r}/pages/{i}", request=r)
    xs = []
    for i, (p, r) in enumerate(zip(ps, reqs)):
        p.alloc(r, "kv", [1, 2], pages=[2 * i, 2 * i + 1])
        p.write(r, "kv", [1, 2])
        if aux_alloc:
            p.alloc(r, "aux", [5])
        if checksums[i] is not None:
            p.write(r, "aux", [5], checksums=[checksums[i]])
        x = p.post(r, d, descs=[(p.pools["kv"].addr(L, s), d.pools["kv"].addr(L, t), 64)
                                for L in range(2) for s, t in zip([1, 2], kv[i])]
                   + [(p.pools["aux"].addr(0, 5), d.pools["aux"].addr(0, dst_slots[i]), 64)],
                   msg=f"{r}_{i}".encode())
        xs.append((p, r, x))
    for i, (p, r, x) in enumerate(xs):
        d.notif_recv(p, f"{r}_{i}".encode(), request=r)
    for i, (p, r, x) in enumerate(xs):
        d.read(r, "kv", kv[i])
        p.done(x, r)
        p.release(x, r)
        p.free(r, "kv", [1, 2])
        if aux_alloc:
            p.free(r, "aux", [5])
    for i, r in enumerate(reqs):
        d.free(r, "kv", kv[i])
    for r, s in dict.fromkeys(zip(reqs, dst_slots)) if aux_alloc else ():
        d.free(r, "aux", [s])
    for r in dict.fromkeys(reqs):
        d.req_done(r)
    b.close()


@case
def aux_replicas_differ(path, bug=True):
    """Two prefill TP ranks send request r1's aux into decode's one aux slot, both in flight;
    each rank's write of its aux slot is recorded. Clean: both hold the same metadata (equal
    checksums), so the surviving bytes do not depend on timing. Bug: rank 1's differs."""
    _send_aux(path, ["r1", "r1"], [3, 3], [META, OTHER if bug else META])
    return [("overlapping_inflight_writes", "decode", "r1", "aux", [3])] if bug else []


@case
def aux_replicas_unhashed(path, bug=True):
    """The same replicas with no checksum of aux recorded on either rank (the hooks hash KV
    only): nothing tells identical writes from different ones, so the overlap is kept as a
    warning (test_replicated_writes_unknown_content_is_a_warning). Clean twin: both ranks'
    aux writes are recorded, equal."""
    _send_aux(path, ["r1", "r1"], [3, 3], [None, None] if bug else [META, META])
    return [("overlapping_inflight_writes", "decode", "r1", "aux", [3])] if bug else []


@case
def aux_slot_shared_across_requests(path, bug=True):
    """Two requests' aux writes (no checksum recorded) land in one decode aux slot together
    (decode's aux allocator, not hooked here, handed the slot out twice): an error whatever
    the content, as two requests never carry one replica. Clean twin: each request gets its
    own aux slot."""
    _send_aux(path, ["r1", "r2"], [3, 3] if bug else [3, 4], [None, None], aux_alloc=False)
    return [("overlapping_inflight_writes", "decode", "r1", "aux", [3])] if bug else []


@case
def aux_replicas_heads_overlap(path, bug=True):
    """SGLang's prefill TP 2 -> decode TP 1 on head-sliced pools: each rank writes its half
    of every decode page (its heads, KV content recorded) at its head offset, and its copy of
    the aux into decode's one aux slot. Bug: rank 1's slices land at offset 0, over rank 0's
    (the KV bytes differ: an error), with the aux not hashed (a warning); the two are one
    finding per pool, never merged under one pool. Clean twin: the slices at their offsets
    and both aux writes recorded, equal: a legal, fully recorded run gives nothing."""
    b = TraceBuilder(path)
    ps = [b.agent(f"prefill{i}") for i in range(2)]
    d = b.agent("decode")
    for a in (*ps, d):
        a.pool("kv", layers=2, slot_bytes=64 if a is d else 32, num_slots=8)
        a.pool("aux", layers=1, slot_bytes=64, num_slots=8)
    d.req_start("r1")
    d.alloc("r1", "kv", [2, 3])
    d.alloc("r1", "aux", [3])
    xs = []
    for i, p in enumerate(ps):
        d.msg_send(p, f"r1/pages/{i}", request="r1")
        p.msg_recv(d, f"r1/pages/{i}", request="r1")
        p.alloc("r1", "kv", [4, 5])
        p.write("r1", "kv", [4, 5], checksums=[0x4EAD0 + 2 * i, 0x4EAD1 + 2 * i])   # rank i's heads
        p.alloc("r1", "aux", [1])
        if not bug:
            p.write("r1", "aux", [1], checksums=[META])
        head = 0 if bug else 32 * i
        descs = [(p.pools["kv"].addr(L, s), d.pools["kv"].addr(L, t) + head, 32)
                 for L in range(2) for s, t in ((4, 2), (5, 3))]
        descs.append((p.pools["aux"].addr(0, 1), d.pools["aux"].addr(0, 3), 64))
        xs.append((p, p.post("r1", d, descs=descs, msg=f"r1_{i}".encode())))
    for i, (p, x) in enumerate(xs):
        d.notif_recv(p, f"r1_{i}".encode(), request="r1")
    d.read("r1", "kv", [2, 3], checksums=[7, 8])
    for p, x in xs:
        p.done(x, "r1")
        p.release(x, "r1")
        p.free("r1", "kv", [4, 5])
        p.free("r1", "aux", [1])
    d.free("r1", "kv", [2, 3])
    d.free("r1", "aux", [3])
    d.req_done("r1")
    b.close()
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [2, 3]),
            ("overlapping_inflight_writes", "decode", "r1", "aux", [3])] if bug else []
