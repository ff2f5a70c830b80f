"""Scenarios whose hazard spans two pools of one request (kv and aux, as SGLang sends a
request's KV pages and its aux/metadata slot in one transfer): every finding names one pool
and that pool's slots. The checks grouped by request and named min(pool), so kv's slots
were reported under aux (pool "aux", slots 0,4,5, 'of pool(s) aux+kv'), which the TUI
painted into aux's slot map and SARIF/JUnit gave as the location.

Slots are chosen so each pool's lowest slot differs: prefill kv 4,5 and aux 0; decode kv
2,3 and aux 1."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, pd

POOLS = (("kv", 2, 64, 8), ("aux", 1, 64, 4))
SRC = {"kv": [4, 5], "aux": [0]}
DST = {"kv": [2, 3], "aux": [1]}


def _pair(path, dst=DST):
    """The pair, with decode's pages of both pools allocated before it tells prefill."""
    b, p, d = pd(path, pools=POOLS)
    d.req_start("r1")
    for pool, slots in dst.items():
        d.alloc("r1", pool, slots)
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    return b, p, d


def _alloc_src(p, write=True):
    for pool, slots in SRC.items():
        p.alloc("r1", pool, slots)
        if write:
            p.write("r1", pool, slots)


def _post(p, d, deliver="post"):
    """One WRITE of r1's kv pages (both layers) and its aux slot."""
    kv, aux = p.pools["kv"], p.pools["aux"]
    descs = [(kv.addr(L, s), d.pools["kv"].addr(L, u), 64) for L in range(2) for s, u in zip(SRC["kv"], DST["kv"])]
    descs.append((aux.addr(0, SRC["aux"][0]), d.pools["aux"].addr(0, DST["aux"][0]), 64))
    return p.post("r1", d, descs=descs, msg=b"r1_kv", deliver=deliver)


def _read(d, slots=DST):
    for pool, s in slots.items():
        d.read("r1", pool, s)


def _free(side, slots):
    for pool, s in slots.items():
        side.free("r1", pool, s)


def _both(check, agent, slots):
    return [(check, agent, "r1", pool, s) for pool, s in slots.items()]


@case
def early_src_free_two_pools(path, bug=True):
    """early_src_free over kv and aux: one src_free_before_done per pool."""
    b, p, d = _pair(path)
    _alloc_src(p)
    x = _post(p, d)
    if bug:
        _free(p, SRC)
    d.notif_recv(p, b"r1_kv", request="r1")
    _read(d)
    p.done(x, "r1")
    p.release(x, "r1")
    if not bug:
        _free(p, SRC)
    _free(d, DST)
    b.close()
    return _both("src_free_before_done", "prefill", SRC) if bug else []


@case
def abort_free_inflight_two_pools(path, bug=True):
    """abort_free_inflight over kv and aux: decode frees both pools' slots while the WRITE
    into them is in flight; one write_after_free per pool."""
    b, p, d = _pair(path)
    _alloc_src(p)
    x = _post(p, d, deliver="later")
    if bug:
        d.req_abort("r1")
        _free(d, DST)
    d.notif_recv(p, b"r1_kv", request="r1")
    x.deliver()
    if not bug:
        d.req_abort("r1")
        _free(d, DST)
    p.done(x, "r1")
    p.release(x, "r1")
    _free(p, SRC)
    b.close()
    return _both("write_after_free", "decode", DST) if bug else []


@case
def notify_first_two_pools(path, bug=True):
    """Decode reads kv and aux before the notification, while the bytes are still in
    flight (poison read: folded); one read_before_done per pool."""
    b, p, d = _pair(path)
    _alloc_src(p)
    x = _post(p, d, deliver="later")
    if bug:
        _read(d)
    d.notif_recv(p, b"r1_kv", request="r1")
    x.deliver()
    if not bug:
        _read(d)
    p.done(x, "r1")
    p.release(x, "r1")
    _free(p, SRC)
    _free(d, DST)
    b.close()
    return _both("read_before_done", "decode", DST) if bug else []


@case
def post_before_write_two_pools(path, bug=True):
    """Prefill posts before writing kv and aux; one post_before_write per pool."""
    b, p, d = _pair(path)
    _alloc_src(p, write=not bug)
    x = _post(p, d)
    if bug:
        for pool, slots in SRC.items():
            p.write("r1", pool, slots)
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    _free(p, SRC)
    _free(d, DST)
    b.close()
    return _both("post_before_write", "prefill", SRC) if bug else []


@case
def read_undelivered_two_pools(path, bug=True):
    """Decode holds one more slot in each pool than the transfer fills (kv 6, aux 2) and
    reads it too; one read_undelivered per pool."""
    held = {"kv": DST["kv"] + [6], "aux": DST["aux"] + [2]}
    b, p, d = _pair(path, dst=held)
    _alloc_src(p)
    x = _post(p, d)
    d.notif_recv(p, b"r1_kv", request="r1")
    _read(d, held if bug else DST)
    p.done(x, "r1")
    p.release(x, "r1")
    _free(p, SRC)
    _free(d, held)
    b.close()
    return _both("read_undelivered", "decode", {"kv": [6], "aux": [2]}) if bug else []


@case
def reuse_before_read_two_pools(path, bug=True):
    """reuse_before_read over kv and aux, the freed slots going to two requests (kv 2 and
    aux 1 to r2, kv 3 to r3): one slot_reuse_before_read per pool, and kv's names both new
    owners (it named the first alone: 'handed to r2')."""
    b, p, d = _pair(path)
    _alloc_src(p)
    x = _post(p, d)
    d.notif_recv(p, b"r1_kv", request="r1")
    if bug:   # r1 never frees them: the allocator hands them out again (double_alloc too)
        d.alloc("r2", "kv", [2])
        d.alloc("r2", "aux", [1])
        d.alloc("r3", "kv", [3])
        _read(d)
        d.free("r2", "kv", [2])
        d.free("r2", "aux", [1])
        d.free("r3", "kv", [3])
        _free(d, DST)
    else:
        _read(d)
        _free(d, DST)
    p.done(x, "r1")
    p.release(x, "r1")
    _free(p, SRC)
    b.close()
    return _both("slot_reuse_before_read", "decode", DST) + [
        ("double_alloc", "decode", "r2", "kv", [2]), ("double_alloc", "decode", "r2", "aux", [1]),
        ("double_alloc", "decode", "r3", "kv", [3])] if bug else []


@case
def abort_free_and_other_pool_mismatch(path, bug=True):
    """Decode frees r1's kv slots 2, 3 while the WRITE into them is in flight
    (write_after_free), and, unrelated, r2's read of its aux slot 2 sees other bytes than
    were delivered (checksum_mismatch). The mismatch is no victim of the free: aux slot 2 is
    not kv slot 2, yet folding matched slot numbers across pools and hid it in the
    write_after_free finding. The clean twin frees after the notification and reads the
    delivered bytes."""
    b, p, d = pd(path, pools=POOLS)
    for r, pool, dst in (("r1", "kv", [2, 3]), ("r2", "aux", [2])):
        d.req_start(r)
        d.alloc(r, pool, dst)
        d.msg_send(p, f"{r}/pages", request=r)
        p.msg_recv(d, f"{r}/pages", request=r)
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    x1 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv", deliver="later")
    p.alloc("r2", "aux", [1])
    p.write("r2", "aux", [1])
    x2 = p.post("r2", d, src=("aux", [1]), dst=("aux", [2]), msg=b"r2_aux")
    d.notif_recv(p, b"r2_aux", request="r2")
    d.read("r2", "aux", [2], checksums=[0xBAD] if bug else None)
    if bug:
        d.req_abort("r1")
        d.free("r1", "kv", [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    x1.deliver()
    if not bug:
        d.req_abort("r1")
        d.free("r1", "kv", [2, 3])
    for r, x, pool, src, dst in (("r1", x1, "kv", [4, 5], None), ("r2", x2, "aux", [1], [2])):
        p.done(x, r)
        p.release(x, r)
        p.free(r, pool, src)
        if dst:
            d.free(r, pool, dst)
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [2, 3]),
            ("checksum_mismatch", "decode", "r2", "aux", [2])] if bug else []


@case
def waiting_on_two_ranks_two_pools(path, bug=True):
    """Heterogeneous TP: decode's r1 pages (kv 2, 3 and aux 1) are filled by two prefill
    ranks, each writing one kv page and rank 1 the aux slot (rank 0 has no aux pool); both see DONE, but no
    notification reaches decode, which holds the pages at trace end. One request_waiting
    per pool, each naming both ranks (it was one finding under pool aux with kv's slots,
    naming one rank, any_value, with the other rank's transfer ids under it)."""
    b = TraceBuilder(path)
    d = b.agent("decode")
    ranks = [b.agent("prefill0"), b.agent("prefill1")]
    for side in [d] + ranks:
        for name, layers, slot_bytes, num_slots in POOLS:
            if not (side is ranks[0] and name == "aux"):   # rank 0 sends no aux (buffer_class_not_sent)
                side.pool(name, layers=layers, slot_bytes=slot_bytes, num_slots=num_slots)
    d.req_start("r1")
    for pool, slots in DST.items():
        d.alloc("r1", pool, slots)
    xs = []
    for i, p in enumerate(ranks):
        d.msg_send(p, f"r1/pages/{i}", request="r1")
        p.msg_recv(d, f"r1/pages/{i}", request="r1")
        p.alloc("r1", "kv", [4], pages=[i])   # rank i fills page i
        p.write("r1", "kv", [4])
        descs = [(p.pools["kv"].addr(L, 4), d.pools["kv"].addr(L, DST["kv"][i]), 64) for L in range(2)]
        if i == 1:
            p.alloc("r1", "aux", [0])
            p.write("r1", "aux", [0])
            descs.append((p.pools["aux"].addr(0, 0), d.pools["aux"].addr(0, 1), 64))
        xs.append(p.post("r1", d, descs=descs, msg=f"r1_kv_{i}".encode()))
    for i, (p, x) in enumerate(zip(ranks, xs)):
        p.done(x, "r1")
        p.release(x, "r1")
        p.free("r1", "kv", [4])
        if i == 1:
            p.free("r1", "aux", [0])
        if not bug:
            d.notif_recv(p, f"r1_kv_{i}".encode(), request="r1")
    if not bug:
        _read(d)
        _free(d, DST)
        d.req_done("r1")
    b.close()
    return _both("request_waiting", "decode", DST) if bug else []
