"""Checks as data: small PD scenarios written with the TraceBuilder, each with the findings
it must produce — ``(check, agent, request, pool, slots)`` — and nothing else.

Every bug scenario takes ``bug``; with ``bug=False`` it is its clean twin and must give
no findings. Legal patterns (prefix sharing, READ mode, appends, ...) expect none.
"""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

CASES: dict[str, "callable"] = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def pd(path, pools=(("kv", 2, 64, 8),)):
    """A prefill/decode pair (one shard each) with the same pools on both sides."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        for name, layers, slot_bytes, num_slots in pools:
            side.pool(name, layers=layers, slot_bytes=slot_bytes, num_slots=num_slots)
    return b, p, d


def handshake(p, d, req, dst_slots, pool="kv", pages=None):
    """Decode allocates destination pages and tells prefill (msg_send → msg_recv)."""
    d.req_start(req)
    d.alloc(req, pool, dst_slots, pages)
    d.msg_send(p, f"{req}/pages", request=req)
    p.msg_recv(d, f"{req}/pages", request=req)


def push(p, d, req, src, dst, pool="kv", msg=None, **kw):
    """Prefill allocates, writes and posts a WRITE of src → dst (no completion yet)."""
    p.alloc(req, pool, src)
    p.write(req, pool, src)
    return p.post(req, d, src=(pool, src), dst=(pool, dst), msg=msg or f"{req}_kv".encode(), **kw)


def finish(p, d, req, x, src, dst, pool="kv", read=True):
    """The clean tail: notification, read, DONE, release, frees."""
    d.notif_recv(p, f"{req}_kv".encode(), request=req)
    if read:
        d.read(req, pool, dst)
    p.done(x, req)
    p.release(x, req)
    p.free(req, pool, src, reason="finish")
    d.free(req, pool, dst, reason="finish")
    d.req_done(req)


# ---------------------------------------------------------------- bug classes (with twins)
@case
def early_src_free(path, bug=True):
    """Prefill returns source pages to its allocator right after posting (dynamo #826)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    x = push(p, d, "r1", [1, 2], [5, 6])
    if bug:
        p.free("r1", "kv", [1, 2], reason="prefill-finished")
        p.alloc("r2", "kv", [1, 2])          # the next owner of the same slots
        p.free("r2", "kv", [1, 2])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6])
    p.done(x, "r1")
    p.release(x, "r1")
    if not bug:
        p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []


@case
def abort_free_inflight(path, bug=True):
    """Decode aborts r1 and frees its pages while prefill's WRITE is still in flight; r2
    gets the pages (sglang #24527)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [3, 4])
    x = push(p, d, "r1", [1, 2], [3, 4], deliver="later")
    if bug:
        d.req_abort("r1")
        d.free("r1", "kv", [3, 4], reason="abort")
        d.notif_recv(p, b"r1_kv", request="r1")
    else:
        d.notif_recv(p, b"r1_kv", request="r1")
        d.req_abort("r1")
        d.free("r1", "kv", [3, 4], reason="abort")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    handshake(p, d, "r2", [3, 4])
    x2 = push(p, d, "r2", [1, 2], [3, 4])
    finish(p, d, "r2", x2, [1, 2], [3, 4])
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [3, 4])] if bug else []


def _dl_addrs(side, pools, idx_list):
    """Addresses of entries of a list that stacks each pool's layers, each with its own slot count."""
    regions = [(side.pools[n], layer) for n in pools for layer in range(side.pools[n].layers)]
    starts, acc = [], 0
    for pool, _layer in regions:
        starts.append(acc)
        acc += pool.num_slots
    out = []
    for i in idx_list:
        r = max(k for k, s in enumerate(starts) if s <= i)
        pool, layer = regions[r]
        out.append(pool.addr(layer, i - starts[r]))
    return out


@case
def uniform_slot_count(path, bug=True):
    """The seeds' suspect: prepped indices layer * M + page with kv's M for index_k too."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("index_k", 2, 128, 16)))
    pools = ("kv", "index_k")
    src_dl = p.prep_dlist(pools)
    dst_dl = p.prep_dlist(pools, remote=d)
    src_slots, dst_slots = [1, 2], [3, 5]
    for pool in pools:
        d.alloc("r1", pool, dst_slots)
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    for pool in pools:
        p.alloc("r1", pool, src_slots)
        p.write("r1", pool, src_slots)
    sidx, didx, nbytes = [], [], []
    for g, (pool, layer) in enumerate([(n, L) for n in pools for L in range(2)]):
        m = 8 if bug else (8 if pool == "kv" else 16)
        base = g * 8 if bug else (0 if pool == "kv" else 16) + layer * m
        for s, t in zip(src_slots, dst_slots):
            sidx.append(base + s)
            didx.append(base + t)
            nbytes.append(p.pools[pool].slot_bytes)
    descs = list(zip(_dl_addrs(p, pools, sidx), _dl_addrs(d, pools, didx), nbytes))
    x = p.post("r1", d, descs=descs, msg=b"r1_kv", src_dlist=src_dl, src_idx=sidx, dst_dlist=dst_dl, dst_idx=didx)
    d.notif_recv(p, b"r1_kv", request="r1")
    for pool in pools:
        d.read("r1", pool, dst_slots)
    p.done(x, "r1")
    p.release(x, "r1")
    for pool in pools:
        p.free("r1", pool, src_slots)
        d.free("r1", pool, dst_slots)
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "index_k", [11, 13])] if bug else []


@case
def notify_first_chunk(path, bug=True):
    """Decode treats the first chunk's notification as the whole request and reads every
    page while the second chunk is still in flight."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [4, 5, 6, 7])
    p.alloc("r1", "kv", [0, 1, 2, 3])
    p.write("r1", "kv", [0, 1, 2, 3])
    x1 = p.post("r1", d, src=("kv", [0, 1]), dst=("kv", [4, 5]), msg=b"r1_kv_0")
    x2 = p.post("r1", d, src=("kv", [2, 3]), dst=("kv", [6, 7]), msg=b"r1_kv_1", deliver="later")
    d.notif_recv(p, b"r1_kv_0", request="r1")
    if bug:
        d.read("r1", "kv", [4, 5, 6, 7])
    d.notif_recv(p, b"r1_kv_1", request="r1")
    x2.deliver()
    if not bug:
        d.read("r1", "kv", [4, 5, 6, 7])
    for x in (x1, x2):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [0, 1, 2, 3])
    d.free("r1", "kv", [4, 5, 6, 7])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [6, 7])] if bug else []


@case
def reuse_before_read(path, bug=True):
    """Decode frees r1's delivered pages and hands them to r2 before r1 reads them."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [1, 2], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    if bug:
        d.free("r1", "kv", [2, 3])
        d.alloc("r2", "kv", [2, 3])
        d.read("r1", "kv", [2, 3])
        d.free("r2", "kv", [2, 3])
    else:
        d.read("r1", "kv", [2, 3])
        d.free("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    b.close()
    return [("slot_reuse_before_read", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def post_before_write(path, bug=True):
    """Prefill posts the WRITE before its kernel's write of the source is recorded."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    if not bug:
        p.write("r1", "kv", [4, 5])
    x = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv")
    if bug:
        p.write("r1", "kv", [4, 5])
    finish(p, d, "r1", x, [4, 5], [2, 3])
    b.close()
    return [("post_before_write", "prefill", "r1", "kv", [4, 5])] if bug else []


@case
def corrupt_read(path, bug=True):
    """Everything is ordered, but the consumer saw different bytes (checksum ground truth)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3], layers=[0])
    d.read("r1", "kv", [2, 3], layers=[1], checksums=[12345, 67890] if bug else None)
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("checksum_mismatch", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def allocator_misuse(path, bug=True):
    """Decode frees a page twice and hands a held page to a second request."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    finish(p, d, "r1", x, [4, 5], [2, 3])
    if bug:
        d.free("r1", "kv", [3])
        d.alloc("r2", "kv", [6])
        d.alloc("r3", "kv", [6])
        d.free("r2", "kv", [6])
        d.free("r3", "kv", [6])
    b.close()
    return [("double_free", "decode", "r1", "kv", [3]), ("double_alloc", "decode", "r3", "kv", [6])] if bug else []


@case
def leaked_pages(path, bug=True):
    """Decode never frees r1's pages."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    if not bug:
        d.free("r1", "kv", [2, 3])
    b.close()
    return [("leak", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def out_of_bounds(path, bug=True):
    """A descriptor points past the end of the destination's registered memory (sglang #31295)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    sp, dp = p.pools["kv"], d.pools["kv"]
    far = dp.addr(1, 7) + 64 * 1000 if bug else dp.addr(0, 3)
    descs = [(sp.addr(0, 4), dp.addr(0, 2), 64), (sp.addr(0, 5), far, 64)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", None, [])] if bug else []


@case
def racing_writes(path, bug=True):
    """Two prefill transfers into the same decode pages are in flight at once."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    x1 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_a")
    if not bug:
        d.notif_recv(p, b"r1_a", request="r1")
        p.done(x1, "r1")
    x2 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_b")
    if bug:
        d.notif_recv(p, b"r1_a", request="r1")
        p.done(x1, "r1")
    d.notif_recv(p, b"r1_b", request="r1")
    p.done(x2, "r1")
    d.read("r1", "kv", [2, 3])
    for x in (x1, x2):
        p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def deregister_inflight(path, bug=True):
    """Prefill deregisters the memory a transfer is still reading."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    kv = p.pools["kv"]
    if bug:
        p.deregister(kv.addr(0, 0), kv.layer_stride)
    finish(p, d, "r1", x, [4, 5], [2, 3])
    if not bug:
        p.deregister(kv.addr(0, 0), kv.layer_stride)
    b.close()
    return [("inflight_src_overwritten", "prefill", "r1", "kv", [4, 5])] if bug else []


# ---------------------------------------------------------------- legal patterns (no findings)
@case
def legal_reuse_after_read(path, bug=False):
    """A slot freed right after its read and reused by the next request at once."""
    b, p, d = pd(path)
    for req in ("r1", "r2", "r3"):
        handshake(p, d, req, [2, 3])
        x = push(p, d, req, [4, 5], [2, 3])
        finish(p, d, req, x, [4, 5], [2, 3])
    b.close()
    return []


@case
def legal_same_slot_numbers(path, bug=False):
    """The same slot numbers in two pools and on two agents, concurrently."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("state", 1, 32, 8)))
    d.alloc("r1", "state", [3])
    handshake(p, d, "r1", [3])
    p.alloc("r1", "kv", [3])
    p.alloc("r1", "state", [3])
    p.write("r1", "kv", [3])
    p.write("r1", "state", [3])
    x1 = p.post("r1", d, src=("kv", [3]), dst=("kv", [3]), msg=b"r1_kv")
    x2 = p.post("r1", d, src=("state", [3]), dst=("state", [3]), msg=b"r1_state")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.notif_recv(p, b"r1_state", request="r1")
    d.read("r1", "kv", [3])
    d.read("r1", "state", [3])
    for x in (x1, x2):
        p.done(x, "r1")
        p.release(x, "r1")
    for side in (p, d):
        side.free("r1", "kv", [3])
        side.free("r1", "state", [3])
    b.close()
    return []


@case
def legal_abort_after_complete(path, bug=False):
    """Decode aborts after the notification: freeing then is safe."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.req_abort("r1")
    d.free("r1", "kv", [2, 3], reason="abort")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    b.close()
    return []


@case
def legal_read_mode(path, bug=False):
    """vLLM-style pull: decode READs from prefill; the notification goes to prefill."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [6, 7])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(d, "r1/ready", request="r1")
    d.msg_recv(p, "r1/ready", request="r1")
    x = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]), msg=b"r1:1")
    p.notif_recv(d, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])            # prefill frees once decode's notification arrived
    d.done(x, "r1")
    d.read("r1", "kv", [6, 7])
    d.release(x, "r1")
    d.free("r1", "kv", [6, 7])
    b.close()
    return []


@case
def legal_prefix_sharing(path, bug=False):
    """Turn 2 shares turn 1's first page (prefix cache); turn 1 frees it while turn 2 holds it."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3])
    finish_pages = [2, 3]
    d.notif_recv(p, b"t1_kv", request="t1")
    d.read("t1", "kv", finish_pages)
    p.done(x, "t1")
    p.release(x, "t1")
    d.req_start("t2")
    d.alloc("t2", "kv", [2], pages=[0], shared=True)      # the shared prefix page
    d.free("t1", "kv", [2, 3])                               # t1 done: slot 2 still held by t2
    d.alloc("t2", "kv", [3], pages=[1])                      # slot 3 reused for t2's new page
    d.msg_send(p, "t2/pages", request="t2")
    p.msg_recv(d, "t2/pages", request="t2")
    p.alloc("t2", "kv", [4], pages=[0], shared=True)         # prefill shares its prefix page too
    p.free("t1", "kv", [4, 5])
    p.alloc("t2", "kv", [6], pages=[1])
    p.write("t2", "kv", [6], pages=[1])
    x2 = p.post("t2", d, src=("kv", [6]), dst=("kv", [3]), msg=b"t2_kv")
    d.notif_recv(p, b"t2_kv", request="t2")
    d.read("t2", "kv", [2, 3])
    p.done(x2, "t2")
    p.release(x2, "t2")
    p.free("t2", "kv", [4, 6])
    d.free("t2", "kv", [2, 3])
    b.close()
    return []


@case
def legal_append_last_page(path, bug=False):
    """Decode appends generated tokens to the partly filled last page it received."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.write("r1", "kv", [3], pages=[1], checksums=[0xABCDEF])   # new tokens in the last page
    d.read("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return []


@case
def legal_read_before_poll(path, bug=False):
    """Decode reads after the notification, before prefill's next poll records DONE."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.free("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    b.close()
    return []


@case
def legal_retry_after_error(path, bug=False):
    """A transfer fails (ERR observed), prefill re-posts it; the retry completes."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3], msg=b"r1_try0")
    p.error(x, "r1")
    p.release(x, "r1")
    x2 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv")
    finish(p, d, "r1", x2, [4, 5], [2, 3])
    b.close()
    return []
