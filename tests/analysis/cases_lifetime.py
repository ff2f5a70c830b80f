"""Scenarios of page lifetime: frees, aborts, deregistrations and allocator misuse while a
transfer still needs the pages (src_free_before_done, write_after_free, inflight_src_overwritten,
slot_reuse_before_read, double_alloc/double_free, leak), with their clean twins and legal patterns."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, finish, handshake, pd, push


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


@case
def deregister_inflight_two_pools(path, bug=True):
    """deregister_inflight where the transfer also reads the request's aux slot and a raw
    registered buffer no layout describes: one finding per pool, each naming its own
    pool's slots, and one with no pool for the raw bytes (the check grouped by request and
    named min(pool): kv's slots 4, 5 reported as 'slot(s) 0,4,5 of pool aux')."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("aux", 1, 64, 4)))
    raw_p, raw_d = 0x7000_0000, 0x7100_0000
    p.register(raw_p, 256)
    d.register(raw_d, 256)
    handshake(p, d, "r1", [2, 3])
    d.alloc("r1", "aux", [1])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    p.alloc("r1", "aux", [0])
    p.write("r1", "aux", [0])
    kv, aux = p.pools["kv"], p.pools["aux"]
    descs = [(kv.addr(L, s), d.pools["kv"].addr(L, u), 64) for L in range(2) for s, u in ((4, 2), (5, 3))]
    descs += [(aux.addr(0, 0), d.pools["aux"].addr(0, 1), 64), (raw_p, raw_d, 64)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")

    def deregister_all():
        for pool in (kv, aux):
            p.deregister(pool.addr(0, 0), pool.layers * pool.layer_stride)
        p.deregister(raw_p, 256)
    if bug:
        deregister_all()
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.read("r1", "aux", [1])
    p.done(x, "r1")
    p.release(x, "r1")
    for pool, ps, ds in (("kv", [4, 5], [2, 3]), ("aux", [0], [1])):
        p.free("r1", pool, ps)
        d.free("r1", pool, ds)
    if not bug:
        deregister_all()
    b.close()
    return [("inflight_src_overwritten", "prefill", "r1", "kv", [4, 5]),
            ("inflight_src_overwritten", "prefill", "r1", "aux", [0]),
            ("inflight_src_overwritten", "prefill", "r1", None, [])] if bug else []


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


@case
def legal_overwrite_from_another_rank(path, bug=False):
    """Prefill rank 0 fills decode's page, decode tells rank 1, which then fills the same page
    again (ordered: rank 0's data is over before rank 1 posts). The read must see rank 1's
    bytes. Rank 0's process has recorded many more events, so its post's seq is larger than
    rank 1's: only happens-before, never seqs of two processes, says which transfer came last.
    ``bug`` (test_analysis_cases: the checksums are not provenance bytes): the read sees rank
    0's bytes (rank 1's data arrived after the read)."""
    b = TraceBuilder(path)
    r0, r1, d = b.agent("prefill0"), b.agent("prefill1"), b.agent("decode")
    for a in (r0, r1, d):
        a.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    for i in range(20):                      # rank 0's seqs run far ahead of rank 1's
        r0.alloc(f"w{i}", "kv", [6])
        r0.free(f"w{i}", "kv", [6])
    d.alloc("r1", "kv", [2])
    d.msg_send(r0, "r1/pages/0", request="r1")
    r0.msg_recv(d, "r1/pages/0", request="r1")
    r0.alloc("r1", "kv", [4])
    r0.write("r1", "kv", [4], checksums=[1001])
    x0 = r0.post("r1", d, src=("kv", [4]), dst=("kv", [2]), msg=b"r1_kv_0")
    d.notif_recv(r0, b"r1_kv_0", request="r1")
    r0.done(x0, "r1")
    d.msg_send(r1, "r1/pages/1", request="r1")   # after rank 0's data is known there
    r1.msg_recv(d, "r1/pages/1", request="r1")
    r1.alloc("r1", "kv", [4])
    r1.write("r1", "kv", [4], checksums=[2002])
    x1 = r1.post("r1", d, src=("kv", [4]), dst=("kv", [2]), msg=b"r1_kv_1")
    d.notif_recv(r1, b"r1_kv_1", request="r1")
    d.read("r1", "kv", [2], checksums=[1001] if bug else None)
    r1.done(x1, "r1")
    for r, x in ((r0, x0), (r1, x1)):
        r.release(x, "r1")
        r.free("r1", "kv", [4])
    d.free("r1", "kv", [2])
    b.close()
    return [("checksum_mismatch", "decode", "r1", "kv", [2])] if bug else []


@case
def prefix_shared_source_pull(path, bug=False):
    """vLLM pull mode with prefill-side prefix sharing: request B hits prefill's prefix cache
    on A's first block (a shared alloc of A's slot 0 as B's page 0: A wrote it, B does not),
    and decode READs A's and B's blocks into their own slots with two transfers in flight
    together, both reading prefill slot 0. B's read of its page 0 holds A's write of page 0:
    that IS B's page 0 (nothing is corrupted, nothing is flagged). Bug twin: B is handed A's
    held slot as a plain allocation (no prefix-cache reference): two requests own it."""
    b, p, d = pd(path)
    p.alloc("A", "kv", [0, 1])
    p.write("A", "kv", [0, 1])
    p.alloc("B", "kv", [0], pages=[0], shared=not bug)
    p.alloc("B", "kv", [2], pages=[1])
    p.write("B", "kv", [2], pages=[1])
    xs = {}
    for req, src, dst in (("A", [0, 1], [0, 1]), ("B", [0, 2], [2, 3])):
        p.msg_send(d, f"blocks:{req}", request=req)
        d.msg_recv(p, f"blocks:{req}", request=req)
        d.req_start(req)
        d.alloc(req, "kv", dst)
        xs[req] = d.post(req, p, op="READ", src=("kv", src), dst=("kv", dst), msg=f"{req}:1".encode())
    for req, src, dst in (("A", [0, 1], [0, 1]), ("B", [0, 2], [2, 3])):
        d.done(xs[req], req)
        d.read(req, "kv", dst)
        d.release(xs[req], req)
        p.notif_recv(d, f"{req}:1".encode(), request=req)
        p.free(req, "kv", src, reason="finish")
        d.free(req, "kv", dst, reason="finish")
    b.close()
    return [("double_alloc", "prefill", "B", "kv", [0])] if bug else []
