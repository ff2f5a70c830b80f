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


# ---------------------------------------------------------------- audit: other engines' conventions
#: (case, bug) -> why the scenario is expected to fail today (a check owned elsewhere is wrong)
XFAIL: dict[tuple[str, bool], str] = {}


def _rank_split(path, ranks=2, slot_bytes=64):
    """Decode (one agent) whose blocks are split across ``ranks`` prefill ranks (vLLM
    heterogeneous TP): each prefill rank's slot holds slot_bytes / ranks bytes."""
    b = TraceBuilder(path)
    ps = [b.agent(f"prefill{i}") for i in range(ranks)]
    d = b.agent("decode")
    for p in ps:
        p.pool("kv", layers=2, slot_bytes=slot_bytes // ranks, num_slots=8)
    d.pool("kv", layers=2, slot_bytes=slot_bytes, num_slots=8)
    return b, ps, d


def _tp_pull(path, offsets, read_after):
    """Decode READs each half of its blocks [5, 6] from one prefill rank each, at
    ``offsets`` inside the slot; reads after the first ``read_after`` READs are DONE."""
    b, ps, d = _rank_split(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [5, 6])
    half = d.pools["kv"].slot_bytes // 2
    xs = []
    for i, p in enumerate(ps):
        src = [1 + 2 * i, 2 + 2 * i]                      # each rank's own slot numbers
        p.alloc("r1", "kv", src)
        p.write("r1", "kv", src)
        p.msg_send(d, f"r1/ready{i}", request="r1")
        d.msg_recv(p, f"r1/ready{i}", request="r1")
        descs = [(p.pools["kv"].addr(L, s), d.pools["kv"].addr(L, t) + offsets[i], half)
                 for L in range(2) for s, t in zip(src, [5, 6])]
        xs.append((p, src, d.post("r1", p, op="READ", descs=descs, msg=f"r1:{i}".encode())))
    for k, (p, src, x) in enumerate(xs):
        if k == read_after:
            d.read("r1", "kv", [5, 6], checksums=[7, 8])   # the two halves together
        d.done(x, "r1")
        p.notif_recv(d, f"r1:{k}".encode(), request="r1")
        p.free("r1", "kv", src)
        d.release(x, "r1")
    if read_after >= len(xs):
        d.read("r1", "kv", [5, 6], checksums=[7, 8])
    d.free("r1", "kv", [5, 6])
    b.close()


@case
def hetero_tp_halves(path, bug=True):
    """vLLM heterogeneous TP: two prefill ranks each fill one half of every decode block
    (descriptors at offset 0 and slot/2 with half-slot lengths). Bug: the halves overlap."""
    _tp_pull(path, [0, 16] if bug else [0, 32], read_after=2)
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [5, 6])] if bug else []


@case
def hetero_tp_read_early(path, bug=True):
    """Heterogeneous TP: decode must see every rank's READ complete before it reads the
    block; the bug reads once the first rank's half is DONE."""
    _tp_pull(path, [0, 32], read_after=1 if bug else 2)
    return [("read_before_done", "decode", "r1", "kv", [5, 6])] if bug else []


@case
def mla_replicated_src(path, bug=True):
    """MLA: one prefill source page is pushed to two decode instances (three shards).
    Prefill may free it only after both transfers completed; the bug frees after one."""
    b = TraceBuilder(path)
    p, d0, d1 = b.agent("prefill"), b.agent("decode0"), b.agent("decode1")
    for side in (p, d0, d1):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for d in (d0, d1):
        handshake(p, d, "r1", [3, 4])                       # the same slot numbers on both decodes
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    x0 = p.post("r1", d0, src=("kv", [1, 2]), dst=("kv", [3, 4]), msg=b"r1_kv_0")
    x1 = p.post("r1", d1, src=("kv", [1, 2]), dst=("kv", [3, 4]), msg=b"r1_kv_1", deliver="later")
    d0.notif_recv(p, b"r1_kv_0", request="r1")
    d0.read("r1", "kv", [3, 4])
    p.done(x0, "r1")
    if bug:
        p.free("r1", "kv", [1, 2])
    d1.notif_recv(p, b"r1_kv_1", request="r1")
    x1.deliver()
    d1.read("r1", "kv", [3, 4])
    p.done(x1, "r1")
    if not bug:
        p.free("r1", "kv", [1, 2])
    for x in (x0, x1):
        p.release(x, "r1")
    for d in (d0, d1):
        d.free("r1", "kv", [3, 4])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []


def _two_readers(path):
    """Prefill holds r1's pages [1, 2]; two decode instances each READ them into their
    own slots [6, 7] (posted, not yet complete)."""
    b = TraceBuilder(path)
    p, d0, d1 = b.agent("prefill"), b.agent("decode0"), b.agent("decode1")
    for side in (p, d0, d1):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    xs = []
    for i, d in enumerate((d0, d1)):
        d.req_start("r1")
        d.alloc("r1", "kv", [6, 7])
        p.msg_send(d, f"r1/ready{i}", request="r1")
        d.msg_recv(p, f"r1/ready{i}", request="r1")
        xs.append(d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]), msg=f"r1:{i}".encode()))
    return b, p, d0, d1, xs


@case
def legal_mla_two_readers(path, bug=False):
    """MLA in pull mode: two decode instances READ the same prefill pages concurrently;
    prefill frees them after both notifications."""
    b, p, d0, d1, xs = _two_readers(path)
    for i, (d, x) in enumerate(zip((d0, d1), xs)):
        d.done(x, "r1")
        d.read("r1", "kv", [6, 7])
        d.release(x, "r1")
        d.free("r1", "kv", [6, 7])
    for i in range(2):
        p.notif_recv((d0, d1)[i], f"r1:{i}".encode(), request="r1")
    p.free("r1", "kv", [1, 2])
    b.close()
    return []


@case
def chunked_notify_last(path, bug=True):
    """Chunked prefill: three WRITEs into disjoint pages, only the last carries a
    notification; prefill polls the earlier chunks DONE before posting it, so decode's
    read after that notification is ordered after all of them. The bug posts the last
    chunk without waiting: its notification says nothing about chunks 0 and 1."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3, 4, 5, 6, 7])
    src = [[0, 1], [2, 3], [4, 5]]
    dst = [[2, 3], [4, 5], [6, 7]]
    xs = []
    for k in range(3):
        p.alloc("r1", "kv", src[k], pages=[2 * k, 2 * k + 1])
        p.write("r1", "kv", src[k])
        if k == 2 and not bug:
            for x in xs:
                p.done(x, "r1")
        xs.append(p.post("r1", d, src=("kv", src[k]), dst=("kv", dst[k]),
                         msg=b"r1_kv_last" if k == 2 else None))
    d.notif_recv(p, b"r1_kv_last", request="r1")
    d.read("r1", "kv", [2, 3, 4, 5, 6, 7])
    if bug:
        for x in xs[:2]:
            p.done(x, "r1")
    p.done(xs[2], "r1")
    for x in xs:
        p.release(x, "r1")
    p.free("r1", "kv", [0, 1, 2, 3, 4, 5])
    d.free("r1", "kv", [2, 3, 4, 5, 6, 7])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [2, 3, 4, 5])] if bug else []


@case
def pull_free_after_notif(path, bug=True):
    """vLLM pull mode: decode READs without a notification, polls DONE, then tells
    prefill with send_notif; prefill frees its blocks only on that notification. The bug
    frees them before it (e.g. on prefill finishing)."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [6, 7])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(d, "r1/ready", request="r1")
    d.msg_recv(p, "r1/ready", request="r1")
    x = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]), deliver="later")
    if bug:
        p.free("r1", "kv", [1, 2], reason="prefill-finished")
    d.done(x, "r1")
    d.read("r1", "kv", [6, 7])
    d.release(x, "r1")
    d.notif_send(p, b"r1:1", request="r1")
    p.notif_recv(d, b"r1:1", request="r1")
    if not bug:
        p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [6, 7])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []


@case
def legal_hybrid_state_pool(path, bug=False):
    """A hybrid (mamba) model: beside the paged kv pool, a state pool with one slot per
    request (different slot numbers on each side, a much larger slot) sent as its own
    transfer with its own notification; decode then updates the state in place, and the
    next request reuses the state slot."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("mamba", 2, 512, 3)))
    for req, (ps, ds) in (("r1", (0, 2)), ("r2", (1, 2))):
        d.req_start(req)
        d.alloc(req, "kv", [4, 5])
        d.alloc(req, "mamba", [ds])
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
        p.alloc(req, "kv", [1, 2])
        p.alloc(req, "mamba", [ps])
        p.write(req, "kv", [1, 2])
        p.write(req, "mamba", [ps])
        xk = p.post(req, d, src=("kv", [1, 2]), dst=("kv", [4, 5]), msg=f"{req}_kv_0_1_0".encode())
        xs = p.post(req, d, src=("mamba", [ps]), dst=("mamba", [ds]), msg=f"{req}_state_0_0".encode())
        d.notif_recv(p, f"{req}_kv_0_1_0".encode(), request=req)
        d.notif_recv(p, f"{req}_state_0_0".encode(), request=req)
        d.read(req, "kv", [4, 5])
        d.read(req, "mamba", [ds])
        d.write(req, "mamba", [ds], checksums=[0x5EED + ds])     # the decode step updates the state
        d.read(req, "mamba", [ds])
        for x in (xk, xs):
            p.done(x, req)
            p.release(x, req)
        p.free(req, "kv", [1, 2])
        p.free(req, "mamba", [ps])
        d.free(req, "kv", [4, 5])
        d.free(req, "mamba", [ds])
        d.req_done(req)
    b.close()
    return []


def _prepped_multi(path, src_slots, dst_slots, reg_pieces=2, deregister=True, reqs=("r1", "r2", "r3")):
    """Prepped lists made once over kv (8 slots per layer on prefill, 12 on decode) and
    index_k (4 / 6 slots, a larger page: one index_k page per two kv pages), stacked
    region by region; every request indexes them as cumulative_offset(pool) + layer *
    M_pool + page with each side's own M. Memory is registered in several regions per
    pool: kv as one registration spanning all its layers, index_k in ``reg_pieces``
    pieces per layer."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    geo = {p: (("kv", 2, 64, 8), ("index_k", 2, 256, 4)), d: (("kv", 2, 64, 12), ("index_k", 2, 256, 6))}
    for side, pools in geo.items():
        for name, layers, sb, n in pools:
            pool = side.pool(name, layers=layers, slot_bytes=sb, num_slots=n, register=False)
            if name == "kv":
                side.register(pool.addr(0, 0), layers * pool.layer_stride)
            else:
                piece = pool.layer_stride // reg_pieces
                for L in range(layers):
                    for k in range(reg_pieces):
                        side.register(pool.addr(L, 0) + k * piece, piece)
    pools = ("kv", "index_k")
    src_dl = p.prep_dlist(pools)
    dst_dl = p.prep_dlist(pools, remote=d)

    def idx(side, pool, layer, slot):
        off = 0 if pool == "kv" else side.pools["kv"].layers * side.pools["kv"].num_slots
        return off + layer * side.pools[pool].num_slots + slot

    for k, req in enumerate(reqs):
        ks, kd = src_slots[k], dst_slots[k]
        is_, id_ = [ks[0] // 2], [kd[0] // 2]   # one index_k page for the two kv pages
        d.req_start(req)
        d.alloc(req, "kv", kd)
        d.alloc(req, "index_k", id_)
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
        p.alloc(req, "kv", ks)
        p.alloc(req, "index_k", is_)
        p.write(req, "kv", ks)
        p.write(req, "index_k", is_)
        sidx, didx, descs = [], [], []
        for pool, ss, ds in (("kv", ks, kd), ("index_k", is_, id_)):
            for L in range(2):
                for s, t in zip(ss, ds):
                    sidx.append(idx(p, pool, L, s))
                    didx.append(idx(d, pool, L, t))
                    descs.append((p.pools[pool].addr(L, s), d.pools[pool].addr(L, t), p.pools[pool].slot_bytes))
        x = p.post(req, d, descs=descs, msg=f"{req}_kv".encode(), src_dlist=src_dl, src_idx=sidx,
                   dst_dlist=dst_dl, dst_idx=didx)
        d.notif_recv(p, f"{req}_kv".encode(), request=req)
        d.read(req, "kv", kd)
        d.read(req, "index_k", id_)
        p.done(x, req)
        p.release(x, req)
        p.free(req, "kv", ks)
        p.free(req, "index_k", is_)
        d.free(req, "kv", kd)
        d.free(req, "index_k", id_)
        d.req_done(req)
    if deregister:
        for side, pools_ in geo.items():
            for name, layers, sb, n in pools_:
                pool = side.pools[name]
                if name == "kv":
                    side.deregister(pool.addr(0, 0), layers * pool.layer_stride)
                else:
                    piece = pool.layer_stride // reg_pieces
                    for L in range(layers):
                        for k in range(reg_pieces):
                            side.deregister(pool.addr(L, 0) + k * piece, piece)
    b.close()
    return p, d


@case
def legal_prepped_reuse_per_pool_counts(path, bug=False):
    """One prepped list pair reused by three requests with different indices; pools with
    different slot counts per pool and per side (layer * M_pool + page, each side's own
    M); several registrations per pool; deregister after every transfer completed.
    Slots up to each side's last (decode kv slot 11 > prefill's 8 slots)."""
    _prepped_multi(path, src_slots=[[0, 1], [6, 7], [2, 3]], dst_slots=[[10, 11], [0, 1], [4, 5]])
    return []


@case
def coalesced_descs(path, bug=True):
    """SGLang's non-prepped path groups contiguous pages into one descriptor per layer
    (length n * item_len): src slots 1-2 → dst slots 5-6 as one 128-byte descriptor —
    legal. The bug: the run is one page too long, into dst slot 7 the request does not hold."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    n = 3 if bug else 2
    descs = [(sp.addr(L, 1), dp.addr(L, 5), n * 64) for L in range(2)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6], checksums=[1, 2])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("desc_not_owned", "decode", "r1", "kv", [7])] if bug else []


def _kv_parts(side, layers=2, half=32, num_slots=8):
    """MHA layout (vLLM): one region per layer, K half then V half, each a layout part."""
    base = side._next_base
    for L in range(layers):
        a = base + L * 2 * half * num_slots
        for k, part in enumerate("KV"):
            side.rec.layout(side.name, "kv", L, a + k * half * num_slots, half, num_slots, part=part)
        side.register(a, 2 * half * num_slots)
    side._next_base = base + layers * 2 * half * num_slots + 0x100000
    return lambda L, part, s: base + L * 2 * half * num_slots + "KV".index(part) * half * num_slots + s * half


@case
def kv_parts_swap(path, bug=True):
    """MHA with K and V halves of each layer region described as layout parts: K goes to
    K and V to V — legal. The bug swaps them: the source's K lands in the decode's V."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    pa, da = _kv_parts(p), _kv_parts(d)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    for L in range(2):
        p.rec.write("prefill", "r1", "kv", L, [1, 2], [100 + L, 200 + L], [0, 1])
    descs = [(pa(L, part, s), da(L, ("V" if part == "K" else "K") if bug else part, t), 32)
             for L in range(2) for part in "KV" for s, t in zip([1, 2], [5, 6])]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    for L in range(2):
        d.rec.read("decode", "r1", "kv", L, [5, 6], [100 + L, 200 + L], [0, 1])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5, 6])] if bug else []


@case
def legal_decode_ranks_one_process(path, bug=False):
    """Two decode TP ranks as two agents in one process (one shard), with the same slot
    numbers, each sent the same (replicated MLA) pages by the prefill agent."""
    b = TraceBuilder(path)
    p = b.agent("prefill")
    d0, d1 = b.agent("decode0", shard="decode"), b.agent("decode1", shard="decode")
    for side in (p, d0, d1):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for d in (d0, d1):
        handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    x0 = p.post("r1", d0, src=("kv", [1, 2]), dst=("kv", [2, 3]), msg=b"r1_kv_0")
    x1 = p.post("r1", d1, src=("kv", [1, 2]), dst=("kv", [2, 3]), msg=b"r1_kv_1")
    d0.notif_recv(p, b"r1_kv_0", request="r1")
    d1.notif_recv(p, b"r1_kv_1", request="r1")
    d0.read("r1", "kv", [2, 3])
    d1.read("r1", "kv", [2, 3])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    for d in (d0, d1):
        d.free("r1", "kv", [2, 3])
    b.close()
    return []


@case
def coalesced_past_region(path, bug=True):
    """kv registered as one NIXL region spanning all its layers (vLLM-style one tensor):
    a grouped run of slots 6-7 of layer 0 is legal; the bug's run starts at slot 7 and
    runs on into layer 1's slot 0 — inside the registration, outside the layer."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        kv = side.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
        side.register(kv.addr(0, 0), 2 * kv.layer_stride)
    first = 7 if bug else 6
    handshake(p, d, "r1", [first, first + 1] if not bug else [7])
    p.alloc("r1", "kv", [6, 7])
    p.write("r1", "kv", [6, 7])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[(sp.addr(0, 6), dp.addr(0, first), 128)], msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [6, 7])
    d.free("r1", "kv", [first, first + 1] if not bug else [7])
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "kv", [7])] if bug else []


@case
def legal_retry_same_msg(path, bug=False):
    """SGLang re-posts a failed chunk with the same notification tag: the failed attempt's
    notification never arrives, the retry's does. The one notif_recv belongs to the retry."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3], msg=b"r1_kv_0_1_0")
    p.error(x, "r1")
    p.release(x, "r1")
    x2 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv_0_1_0")
    d.notif_recv(p, b"r1_kv_0_1_0", request="r1")
    d.read("r1", "kv", [2, 3])
    d.free("r1", "kv", [2, 3])
    p.done(x2, "r1")
    p.release(x2, "r1")
    p.free("r1", "kv", [4, 5])
    b.close()
    return []


@case
def late_post_after_abort(path, bug=True):
    """Decode aborts r1 and frees its pages before prefill posted; r2 gets them. The bug:
    prefill never hears of the abort and posts r1's WRITE into r2's pages. The clean twin:
    prefill hears of the abort and posts nothing."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    d.req_abort("r1")
    d.free("r1", "kv", [2, 3], reason="abort")
    if bug:
        x = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv")
    else:
        d.msg_send(p, "r1/abort", request="r1")
        p.msg_recv(d, "r1/abort", request="r1")
    handshake(p, d, "r2", [2, 3])
    if bug:
        d.notif_recv(p, b"r1_kv", request="r1")
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    x2 = push(p, d, "r2", [6, 7], [2, 3])
    finish(p, d, "r2", x2, [6, 7], [2, 3])
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def legal_layerwise_notify(path, bug=False):
    """Layer-wise pipelining: one WRITE (and notification) per layer as prefill's forward
    pass produces it; decode reads layer 0 as soon as its notification arrived, while
    layer 1 is still in flight."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    xs = []
    for L in range(2):
        p.write("r1", "kv", [4, 5], layers=[L])
        xs.append(p.post("r1", d, src=("kv", [4, 5], [L]), dst=("kv", [2, 3], [L]),
                         msg=f"r1_kv_L{L}".encode(), deliver="later"))
    for L in range(2):
        d.notif_recv(p, f"r1_kv_L{L}".encode(), request="r1")
        xs[L].deliver()
        d.read("r1", "kv", [2, 3], layers=[L])
    for x in xs:
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return []


@case
def radix_prefix_hit(path, bug=True):
    """A radix (prefix) cache keeps a finished request's pages: t1 frees its reference,
    the page stays cached, and t2 later takes a shared reference to it (a prefix hit) on
    both sides — its content is still t1's write / t1's delivered data, and prefill
    resends it. The bug: prefill's slot 4 is a fresh (not shared) allocation t2 never
    writes, so the transfer sends stale bytes."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3])
    finish(p, d, "t1", x, [4, 5], [2, 3])                   # both sides free t1's references
    d.req_start("t2")
    d.alloc("t2", "kv", [2], pages=[0], shared=True)       # decode prefix hit
    d.alloc("t2", "kv", [6], pages=[1])
    d.msg_send(p, "t2/pages", request="t2")
    p.msg_recv(d, "t2/pages", request="t2")
    p.alloc("t2", "kv", [4], pages=[0], shared=not bug)   # prefill prefix hit (bug: a fresh page)
    p.alloc("t2", "kv", [7], pages=[1])
    p.write("t2", "kv", [7], pages=[1])
    x2 = p.post("t2", d, src=("kv", [4, 7]), dst=("kv", [2, 6]), msg=b"t2_kv")   # resends the prefix page too
    d.notif_recv(p, b"t2_kv", request="t2")
    d.read("t2", "kv", [2, 6])
    p.done(x2, "t2")
    p.release(x2, "t2")
    p.free("t2", "kv", [4, 7])
    d.free("t2", "kv", [2, 6])
    b.close()
    return [("post_before_write", "prefill", "t2", "kv", [4])] if bug else []


@case
def legal_two_prefills_reuse(path, bug=False):
    """Two prefill instances feed one decode; a decode page read for r1 (from prefill A)
    is reused at once for r2 (from prefill B), while A has not yet polled r1's DONE."""
    b = TraceBuilder(path)
    pa_, pb, d = b.agent("prefillA"), b.agent("prefillB"), b.agent("decode")
    for side in (pa_, pb, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    handshake(pa_, d, "r1", [2, 3])
    x1 = push(pa_, d, "r1", [4, 5], [2, 3])
    d.notif_recv(pa_, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.free("r1", "kv", [2, 3])
    handshake(pb, d, "r2", [2, 3])
    x2 = push(pb, d, "r2", [4, 5], [2, 3])
    d.notif_recv(pb, b"r2_kv", request="r2")
    d.read("r2", "kv", [2, 3])
    d.free("r2", "kv", [2, 3])
    for p, x, r in ((pa_, x1, "r1"), (pb, x2, "r2")):
        p.done(x, r)
        p.release(x, r)
        p.free(r, "kv", [4, 5])
    b.close()
    return []


@case
def pull_abort_inflight(path, bug=True):
    """Pull mode: decode aborts a request while its own READ is in flight. The bug frees
    the destination blocks at once; the clean twin waits for the READ's DONE first."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [6, 7])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(d, "r1/ready", request="r1")
    d.msg_recv(p, "r1/ready", request="r1")
    x = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]), msg=b"r1:1", deliver="later")
    d.req_abort("r1")
    if bug:
        d.free("r1", "kv", [6, 7], reason="abort")
    d.done(x, "r1")
    d.release(x, "r1")
    if not bug:
        d.free("r1", "kv", [6, 7], reason="abort")
    p.notif_recv(d, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [6, 7])] if bug else []


@case
def legal_radix_decode_hit(path, bug=False):
    """Decode's prefix cache kept t1's delivered page after t1 freed it; t2 takes a shared
    reference (a prefix hit) and prefill sends only the new page."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3])
    finish(p, d, "t1", x, [4, 5], [2, 3])
    d.req_start("t2")
    d.alloc("t2", "kv", [2], pages=[0], shared=True)       # decode prefix hit
    d.alloc("t2", "kv", [6], pages=[1])
    d.msg_send(p, "t2/pages", request="t2")
    p.msg_recv(d, "t2/pages", request="t2")
    p.alloc("t2", "kv", [7], pages=[1])
    p.write("t2", "kv", [7], pages=[1])
    x2 = p.post("t2", d, src=("kv", [7]), dst=("kv", [6]), msg=b"t2_kv")
    d.notif_recv(p, b"t2_kv", request="t2")
    d.read("t2", "kv", [2, 6])
    p.done(x2, "t2")
    p.release(x2, "t2")
    p.free("t2", "kv", [7])
    d.free("t2", "kv", [2, 6])
    b.close()
    return []


@case
def deregister_dst_inflight(path, bug=True):
    """Decode tears down (deregisters) one registration piece of its index_k memory while a
    prepped WRITE into it is still in flight; the clean twin deregisters after the last
    notification (as legal_prepped_reuse_per_pool_counts does)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
        ik = side.pool("index_k", layers=1, slot_bytes=256, num_slots=4, register=False)
        side.register(ik.addr(0, 0), 2 * 256)
        side.register(ik.addr(0, 2), 2 * 256)
    for pool in ("kv", "index_k"):
        d.alloc("r1", pool, [3])
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    for pool in ("kv", "index_k"):
        p.alloc("r1", pool, [1])
        p.write("r1", pool, [1])
    x1 = p.post("r1", d, src=("kv", [1]), dst=("kv", [3]), msg=b"r1_kv")
    x2 = p.post("r1", d, src=("index_k", [1]), dst=("index_k", [3]), msg=b"r1_state")
    ik = d.pools["index_k"]
    if bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
    d.notif_recv(p, b"r1_kv", request="r1")
    d.notif_recv(p, b"r1_state", request="r1")
    d.read("r1", "kv", [3])
    d.read("r1", "index_k", [3])
    for x in (x1, x2):
        p.done(x, "r1")
        p.release(x, "r1")
    for side in (p, d):
        for pool in ("kv", "index_k"):
            side.free("r1", pool, [1] if side is p else [3])
    if not bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
    b.close()
    return [("inflight_src_overwritten", "decode", "r1", "index_k", [3])] if bug else []


@case
def pull_post_before_write(path, bug=True):
    """Pull mode: prefill tells decode its blocks are ready (and decode posts its READ)
    before prefill's forward pass wrote them; the clean twin writes first."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [6, 7])
    p.alloc("r1", "kv", [1, 2])
    if not bug:
        p.write("r1", "kv", [1, 2])
    p.msg_send(d, "r1/ready", request="r1")
    if bug:
        p.write("r1", "kv", [1, 2])
    d.msg_recv(p, "r1/ready", request="r1")
    x = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]), msg=b"r1:1")
    d.done(x, "r1")
    d.read("r1", "kv", [6, 7])
    d.release(x, "r1")
    p.notif_recv(d, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [6, 7])
    b.close()
    return [("post_before_write", "prefill", "r1", "kv", [1, 2])] if bug else []


@case
def legal_colocated_one_shard(path, bug=False):
    """Prefill and decode agents in one process (one shard, e.g. a single-node test rig):
    the same slot numbers on both, every edge inside the shard."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill", shard="both"), b.agent("decode", shard="both")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for req in ("r1", "r2"):
        handshake(p, d, req, [2, 3])
        x = push(p, d, req, [2, 3], [2, 3])
        finish(p, d, req, x, [2, 3], [2, 3])
    b.close()
    return []


@case
def legal_page_size_mismatch(path, bug=False):
    """Decode pages hold two prefill pages (32 vs 16 tokens): prefill page 2k goes to the
    first half of decode page k, page 2k+1 to the second half (sub-slot offsets)."""
    return _page_size_mismatch(path, bug)


@case
def page_size_mismatch_wrong_half(path, bug=True):
    """Decode pages of two prefill pages; the bug puts every odd prefill page into the
    first half of its decode page, over the even one, leaving the second half unwritten."""
    _page_size_mismatch(path, bug)
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5, 6])] if bug else []


def _page_size_mismatch(path, bug):
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.pool("kv", layers=2, slot_bytes=32, num_slots=8, page_tokens=16)
    d.pool("kv", layers=2, slot_bytes=64, num_slots=8, page_tokens=32)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [0, 1, 2, 3])
    p.write("r1", "kv", [0, 1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(L, s), dp.addr(L, [5, 6][s // 2]) + (0 if bug else 32 * (s % 2)), 32)
             for L in range(2) for s in range(4)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6], checksums=[1, 2])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [0, 1, 2, 3])
    d.free("r1", "kv", [5, 6])
    b.close()
    return []


@case
def chunked_partial_page(path, bug=True):
    """Chunked prefill: chunk 0 ends mid-page, so its last page (slot 1) is sent partly
    filled and sent again, completed, with chunk 1. Prefill may refill slot 1 only after
    chunk 0's transfer is DONE; the bug writes chunk 1's tokens into it while chunk 0 is
    still reading it."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [4, 5, 6])
    p.alloc("r1", "kv", [0, 1, 2])
    p.write("r1", "kv", [0, 1])
    x0 = p.post("r1", d, src=("kv", [0, 1]), dst=("kv", [4, 5]), msg=b"r1_kv_0_0_0")
    if not bug:
        p.done(x0, "r1")
    p.write("r1", "kv", [1, 2])                      # chunk 1 completes page 1 and fills page 2
    if bug:
        p.done(x0, "r1")
    x1 = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv_1_1_0")
    d.notif_recv(p, b"r1_kv_0_0_0", request="r1")
    d.notif_recv(p, b"r1_kv_1_1_0", request="r1")
    d.read("r1", "kv", [4, 5, 6])
    p.done(x1, "r1")
    for x in (x0, x1):
        p.release(x, "r1")
    p.free("r1", "kv", [0, 1, 2])
    d.free("r1", "kv", [4, 5, 6])
    b.close()
    return [("inflight_src_overwritten", "prefill", "r1", "kv", [1])] if bug else []


@case
def legal_split_scheduler_worker(path, bug=False):
    """vLLM's process split on decode: the scheduler process allocates and frees blocks
    (its hooks name the worker's agent), the GPU worker process owns the NIXL agent, posts
    the READ and reads; scheduler → worker → scheduler hand-offs are control messages."""
    b = TraceBuilder(path)
    p = b.agent("prefill")
    p.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    sched = b.agent("decode", shard="decode-sched")
    sched.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
    w = b.agent("decode", shard="decode-worker")
    w.pool("kv", layers=2, slot_bytes=64, num_slots=8, base=sched.pools["kv"].base)
    sched.req_start("r1")
    sched.alloc("r1", "kv", [6, 7])
    sched.msg_send(w, "r1/sched", request="r1")
    w.msg_recv(sched, "r1/sched", request="r1")
    w.pages.update(sched.pages)
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(w, "r1/ready", request="r1")
    w.msg_recv(p, "r1/ready", request="r1")
    x = w.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]))
    w.done(x, "r1")
    w.read("r1", "kv", [6, 7])
    w.release(x, "r1")
    w.notif_send(p, b"r1:1", request="r1")
    p.notif_recv(w, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])
    w.msg_send(sched, "r1/finished", request="r1")
    sched.msg_recv(w, "r1/finished", request="r1")
    sched.free("r1", "kv", [6, 7])
    b.close()
    return []


XFAIL[("legal_split_scheduler_worker", False)] = (
    "layer_offset_mismatch, desc_not_owned and read_undelivered (through views end_hold / slot_ev / reads, "
    "which key an agent's slots by shard and look for holdings only in the agent's home shard): allocs "
    "recorded by the scheduler process for the worker's agent are not seen, so the READ's destination "
    "looks unowned, its pages unknown and the read undelivered")


@case
def coalesced_early_free(path, bug=True):
    """Grouped descriptors (one per layer over slots 1-2 → 5-6). The bug: prefill returns
    the run's second source page and decode the run's second destination page (an abort
    of part of the request) before the transfer is known complete."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[(sp.addr(L, 1), dp.addr(L, 5), 128) for L in range(2)], msg=b"r1_kv")
    if bug:
        p.free("r1", "kv", [2])
        d.free("r1", "kv", [6])
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1] if bug else [1, 2])
    d.free("r1", "kv", [5] if bug else [5, 6])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [2]),
            ("write_after_free", "decode", "r1", "kv", [6])] if bug else []


@case
def coalesced_read_early(path, bug=True):
    """Grouped descriptors in two chunks: chunk 0 covers slots 5-6 in one descriptor per
    layer, chunk 1 slot 7. The bug reads the whole run after chunk 1's notification only."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6, 7])
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x0 = p.post("r1", d, descs=[(sp.addr(L, 1), dp.addr(L, 5), 128) for L in range(2)], msg=b"r1_kv_0")
    x1 = p.post("r1", d, src=("kv", [3]), dst=("kv", [7]), msg=b"r1_kv_1")
    d.notif_recv(p, b"r1_kv_1", request="r1")
    if bug:
        d.read("r1", "kv", [6], checksums=[1])          # the run's second page (no whole-slot prediction)
        d.read("r1", "kv", [7])
    d.notif_recv(p, b"r1_kv_0", request="r1")
    if not bug:
        d.read("r1", "kv", [6], checksums=[1])
        d.read("r1", "kv", [7])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6, 7])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [6])] if bug else []


@case
def use_after_deregister(path, bug=True):
    """Decode tears down one registration piece of its index_k memory and tells prefill
    (a control message); prefill then posts into it anyway. The clean twin deregisters
    only after the transfer completed."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        ik = side.pool("index_k", layers=1, slot_bytes=256, num_slots=4, register=False)
        side.register(ik.addr(0, 0), 2 * 256)
        side.register(ik.addr(0, 2), 2 * 256)
    ik = d.pools["index_k"]
    handshake(p, d, "r1", [3], pool="index_k")
    if bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
        d.msg_send(p, "teardown", request="r1")
        p.msg_recv(d, "teardown", request="r1")
    x = push(p, d, "r1", [1], [3], pool="index_k")
    finish(p, d, "r1", x, [1], [3], pool="index_k")
    if not bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "index_k", [3])] if bug else []


@case
def mla_two_readers_free(path, bug=True):
    """Pull-mode twin of legal_mla_two_readers: two decode instances READ the same prefill
    pages; the bug frees them on the first reader's notification, the second READ still
    in flight."""
    b, p, d0, d1, xs = _two_readers(path)
    d0.done(xs[0], "r1")
    p.notif_recv(d0, b"r1:0", request="r1")
    if bug:
        p.free("r1", "kv", [1, 2])
    d1.done(xs[1], "r1")
    p.notif_recv(d1, b"r1:1", request="r1")
    if not bug:
        p.free("r1", "kv", [1, 2])
    for d, x in zip((d0, d1), xs):
        d.read("r1", "kv", [6, 7])
        d.release(x, "r1")
        d.free("r1", "kv", [6, 7])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []

import cases_answers  # noqa: E402,F401  (issue 16's scenarios register themselves)
