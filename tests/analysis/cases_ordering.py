"""Scenarios of completion order: reads before the data landed, posts before the source was
written, torn or overlapping writes (read_before_done, post_before_write, checksum_mismatch,
overlapping_inflight_writes), with their clean twins and legal patterns."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, finish, handshake, pd, push


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
def racing_writes(path, bug=True):
    """Two prefill transfers into the same decode pages are in flight at once, carrying
    different bytes: prefill recomputed the pages (a second write) and resends them while
    the first copy is still in flight, so the stale copy may land last (and the first
    transfer's source changes under it). Equal bytes would not race (aux_replicas_differ)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    x1 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_a")
    if not bug:
        d.notif_recv(p, b"r1_a", request="r1")
        p.done(x1, "r1")
    p.write("r1", "kv", [4, 5], checksums=[0x5EC0, 0x5EC1])
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
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [2, 3]),
            ("inflight_src_overwritten", "prefill", "r1", "kv", [4, 5])] if bug else []


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
def hetero_tp_token_slices(path, bug=True):
    """SGLang heterogeneous TP (prefill TP2 -> decode TP1, ``send_kvcache_slice``): pages are
    token-major ([token][head]), so each prefill rank WRITEs its heads of every token of a
    decode page as one descriptor per token (8 of a token's 16 bytes, at its head offset),
    the two ranks' descriptors interleaved in the same decode pages, posted concurrently.
    Bug: rank 1's head offset is 0 (``dst_head_offset`` lost), over rank 0's slices."""
    b, ps, d = _rank_split(path, slot_bytes=64)          # 4 tokens x 16 B; 8 B per rank
    d.req_start("r1")
    d.alloc("r1", "kv", [2, 3])
    xs = []
    for i, p in enumerate(ps):
        d.msg_send(p, f"r1/pages/{i}", request="r1")
        p.msg_recv(d, f"r1/pages/{i}", request="r1")
        p.alloc("r1", "kv", [4, 5])
        p.write("r1", "kv", [4, 5], checksums=[0x4EAD0 + 2 * i, 0x4EAD1 + 2 * i])   # rank i's heads
        head = 0 if bug else 8 * i
        descs = [(p.pools["kv"].addr(L, s) + 8 * t, d.pools["kv"].addr(L, u) + 16 * t + head, 8)
                 for L in range(2) for s, u in ((4, 2), (5, 3)) for t in range(4)]
        xs.append((p, p.post("r1", d, descs=descs, msg=f"r1_kv_{i}".encode())))
    for i, (p, x) in enumerate(xs):
        d.notif_recv(p, f"r1_kv_{i}".encode(), request="r1")
    d.read("r1", "kv", [2, 3], checksums=[7, 8])
    for p, x in xs:
        p.done(x, "r1")
        p.release(x, "r1")
        p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    d.req_done("r1")
    b.close()
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def racing_writes_two_pools(path, bug=True):
    """racing_writes where each posting also carries the request's aux slot (both rewritten
    before the second posting, so the two carry different bytes): the race is one finding per
    pool, each naming its own pool's slots (not kv's pages under aux)."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("aux", 1, 64, 4)))
    handshake(p, d, "r1", [2, 3])
    d.alloc("r1", "aux", [1])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    p.alloc("r1", "aux", [0])
    p.write("r1", "aux", [0])
    kv, aux = p.pools["kv"], p.pools["aux"]
    descs = [(kv.addr(L, s), d.pools["kv"].addr(L, u), 64) for L in range(2) for s, u in ((4, 2), (5, 3))]
    descs.append((aux.addr(0, 0), d.pools["aux"].addr(0, 1), 64))
    x1 = p.post("r1", d, descs=descs, msg=b"r1_a")
    if not bug:
        d.notif_recv(p, b"r1_a", request="r1")
        p.done(x1, "r1")
    p.write("r1", "kv", [4, 5], checksums=[0x5EC0, 0x5EC1])
    p.write("r1", "aux", [0], checksums=[0x5EC2])
    x2 = p.post("r1", d, descs=descs, msg=b"r1_b")
    if bug:
        d.notif_recv(p, b"r1_a", request="r1")
        p.done(x1, "r1")
    d.notif_recv(p, b"r1_b", request="r1")
    p.done(x2, "r1")
    d.read("r1", "kv", [2, 3])
    for x in (x1, x2):
        p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    p.free("r1", "aux", [0])
    d.free("r1", "kv", [2, 3])
    d.free("r1", "aux", [1])
    b.close()
    # the first posting's sources change under it too: inflight_src_overwritten, one finding
    # per pool as well
    return [("overlapping_inflight_writes", "decode", "r1", "kv", [2, 3]),
            ("overlapping_inflight_writes", "decode", "r1", "aux", [1]),
            ("inflight_src_overwritten", "prefill", "r1", "kv", [4, 5]),
            ("inflight_src_overwritten", "prefill", "r1", "aux", [0])] if bug else []


@case
def hetero_tp_read_early(path, bug=True):
    """Heterogeneous TP: decode must see every rank's READ complete before it reads the
    block; the bug reads once the first rank's half is DONE."""
    _tp_pull(path, [0, 32], read_after=1 if bug else 2)
    return [("read_before_done", "decode", "r1", "kv", [5, 6])] if bug else []


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
        d.read("r1", "kv", [6])         # the run's second page: its bytes are there, the notification is not
        d.read("r1", "kv", [7])
    d.notif_recv(p, b"r1_kv_0", request="r1")
    if not bug:
        d.read("r1", "kv", [6])
        d.read("r1", "kv", [7])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6, 7])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [6])] if bug else []


@case
def replicas_read_early(path, bug=True):
    """Two prefill ranks both push r1's page into decode's slot 2 (identical replicas: MLA's
    latent KV every rank holds), rank 1 after fewer events of its own; decode reads before
    either notification. The finding's first event is rank 1's post, with rank 1's shard
    (the check took min(post_seq) but any_value(shard) over the two, pairing rank 1's seq
    with rank 0's shard: an event that is no post)."""
    b = TraceBuilder(path)
    d = b.agent("decode")
    ranks = [b.agent("prefill0"), b.agent("prefill1")]
    for side in [d] + ranks:
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    d.req_start("r1")
    d.alloc("r1", "kv", [2])
    ranks[0].req_start("r1")        # rank 0's post comes later in its own shard
    ranks[0].alloc("r9", "kv", [7])
    ranks[0].free("r9", "kv", [7])
    xs = []
    for i, p in enumerate(ranks):
        d.msg_send(p, f"r1/pages/{i}", request="r1")
        p.msg_recv(d, f"r1/pages/{i}", request="r1")
        p.alloc("r1", "kv", [4])
        p.write("r1", "kv", [4])
        xs.append(p.post("r1", d, src=("kv", [4]), dst=("kv", [2]), msg=f"r1_kv_{i}".encode(), deliver="later"))
    if bug:
        d.read("r1", "kv", [2])
    for i, (p, x) in enumerate(zip(ranks, xs)):
        d.notif_recv(p, f"r1_kv_{i}".encode(), request="r1")
        x.deliver()
    if not bug:
        d.read("r1", "kv", [2])
    for p, x in zip(ranks, xs):
        p.done(x, "r1")
        p.release(x, "r1")
        p.free("r1", "kv", [4])
    d.free("r1", "kv", [2])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [2])] if bug else []
