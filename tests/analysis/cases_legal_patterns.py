"""Legal patterns an outside engine produces that look suspicious to a naive checker, each
with its buggy twin where one is natural: prefix sharing among several holders, one slot
generation filled by several transfers (layers, sub-slot offsets), READ-mode chunks, a
free on the consumer's acknowledgement, a retry on fresh source pages after an error,
zero-length and reordered descriptors, a prefill page split over two decode pages, a
preempted request recomputing its pages, an abort that waits for the transfer, and shards
whose clocks disagree. Registered in ``CASES`` like every other scenario."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, finish, handshake, pd, push


# ------------------------------------------------------------ prefix sharing, several holders
@case
def radix_three_holders(path, bug=True):
    """Decode's radix cache: t1 receives slots 2, 3; t2 and t3 each take a shared reference
    to slot 2 (page 0) and get their own page 1 by transfer. The founder t1 frees first, t2
    and t3 keep reading slot 2; slot 2 goes to a later request r4 only after every holder
    freed it. The bug hands slot 2 to r4 (a fresh allocation) while t3 still holds it: r4's
    data lands and t3 reads r4's bytes as its prefix."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3])
    d.notif_recv(p, b"t1_kv", request="t1")
    d.read("t1", "kv", [2, 3])
    p.done(x, "t1")
    p.release(x, "t1")
    p.free("t1", "kv", [4, 5])
    for req, own, src in (("t2", 6, 1), ("t3", 7, 0)):
        d.req_start(req)
        d.alloc(req, "kv", [2], pages=[0], shared=True)
        d.alloc(req, "kv", [own], pages=[1])
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
    d.free("t1", "kv", [2, 3])                       # the founder leaves first
    d.req_done("t1")
    for req, own, src in (("t2", 6, 1), ("t3", 7, 0)):
        p.alloc(req, "kv", [src], pages=[1])
        p.write(req, "kv", [src], pages=[1])
        x = p.post(req, d, src=("kv", [src]), dst=("kv", [own]), msg=f"{req}_kv".encode())
        d.notif_recv(p, f"{req}_kv".encode(), request=req)
        p.done(x, req)
        p.release(x, req)
        p.free(req, "kv", [src])
    d.read("t2", "kv", [2, 6])
    d.free("t2", "kv", [2, 6])
    d.req_done("t2")
    if not bug:
        d.read("t3", "kv", [2, 7])
        d.free("t3", "kv", [2, 7])
        d.req_done("t3")
    handshake(p, d, "r4", [2])                       # slot 2 reused for another prefix
    x4 = push(p, d, "r4", [3], [2])
    d.notif_recv(p, b"r4_kv", request="r4")
    if bug:
        d.read("t3", "kv", [2, 7])                   # t3 still held slot 2: r4's bytes
        d.free("t3", "kv", [2, 7])
        d.req_done("t3")
    d.read("r4", "kv", [2])
    p.done(x4, "r4")
    p.release(x4, "r4")
    p.free("r4", "kv", [3])
    d.free("r4", "kv", [2])
    b.close()
    return [("double_alloc", "decode", "r4", "kv", [2])] if bug else []


# ------------------------------------------------- one slot generation, several transfers
@case
def chunks_by_layer_and_offset(path, bug=True):
    """Decode's slots 3, 4 of r1 are filled by two transfers: xa carries layer 0 and the
    first half of layer 1, xb the second half of layer 1 (a chunked, layer-pipelined
    sender with sub-slot descriptors). Decode reads every layer after both notifications.
    The bug reads layer 1 after xa's notification alone."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [3, 4])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    sp, dp = p.pools["kv"], d.pools["kv"]
    pairs = ((1, 3), (2, 4))
    xa = p.post("r1", d, msg=b"r1_a", descs=[(sp.addr(0, s), dp.addr(0, t), 64) for s, t in pairs]
                + [(sp.addr(1, s), dp.addr(1, t), 32) for s, t in pairs])
    d.notif_recv(p, b"r1_a", request="r1")
    d.read("r1", "kv", [3, 4], layers=[0])
    xb = p.post("r1", d, msg=b"r1_b", descs=[(sp.addr(1, s) + 32, dp.addr(1, t) + 32, 32) for s, t in pairs],
                deliver="later")
    if bug:
        d.read("r1", "kv", [3, 4], layers=[1], checksums=[11, 12])
    d.notif_recv(p, b"r1_b", request="r1")
    xb.deliver()
    if not bug:
        d.read("r1", "kv", [3, 4], layers=[1], checksums=[11, 12])
    for x in (xa, xb):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [3, 4])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [3, 4])] if bug else []


@case
def legal_retry_fresh_source(path, bug=False):
    """A WRITE fails (ERR observed on prefill) before moving its bytes; prefill frees the
    failed attempt's source pages, recomputes into fresh pages and posts again into the
    same decode pages. Decode reads after the retry's notification: the failed attempt's
    bytes were never delivered, never read."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3], msg=b"r1_try0", deliver="later")
    p.error(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5], reason="xfer_error")
    x2 = push(p, d, "r1", [6, 7], [2, 3])
    finish(p, d, "r1", x2, [6, 7], [2, 3])
    b.close()
    return []


# ----------------------------------------------------------------------------- READ mode
@case
def pull_chunks_free_per_chunk(path, bug=True):
    """vLLM-style pull in two chunks: decode READs prefill's slots 1, 2 then 3 (each READ's
    notification goes to prefill), and prefill frees each chunk's pages once that chunk's
    notification arrived. The bug frees every page on the first notification, the second
    READ still in flight."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [5, 6, 7])
    p.req_start("r1")
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    p.msg_send(d, "r1/ready", request="r1")
    d.msg_recv(p, "r1/ready", request="r1")
    x0 = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1:0")
    x1 = d.post("r1", p, op="READ", src=("kv", [3]), dst=("kv", [7]), msg=b"r1:1")
    d.done(x0, "r1")
    p.notif_recv(d, b"r1:0", request="r1")
    p.free("r1", "kv", [1, 2, 3] if bug else [1, 2])
    d.done(x1, "r1")
    p.notif_recv(d, b"r1:1", request="r1")
    if not bug:
        p.free("r1", "kv", [3])
    p.req_done("r1")
    d.read("r1", "kv", [5, 6, 7])
    for x in (x0, x1):
        d.release(x, "r1")
    d.free("r1", "kv", [5, 6, 7])
    d.req_done("r1")
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [3])] if bug else []


# ------------------------------------------------------ free on the consumer's acknowledgement
@case
def free_on_decode_ack(path, bug=True):
    """Prefill frees r1's source pages when decode acknowledges them, before its own poll
    sees DONE: legal when decode acknowledges after the notification (the bytes arrived).
    The bug: decode acknowledges the page hand-off (a status reply) before the
    notification, so nothing orders the free after the transfer."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    if not bug:
        d.notif_recv(p, b"r1_kv", request="r1")
    d.msg_send(p, "r1/ack", request="r1")
    p.msg_recv(d, "r1/ack", request="r1")
    p.free("r1", "kv", [4, 5], reason="acked")
    if bug:
        d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.free("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [4, 5])] if bug else []


# ------------------------------------------------------------------------ descriptors
@case
def zero_length_descs(path, bug=True):
    """A sender that pads its descriptor list: besides r1's slot 1 → 5 of each layer, a
    zero-length entry at the end of decode's layer-1 region and one at the start of slot 7,
    which r1 does not hold — neither moves a byte. The bug gives the second one 8 bytes:
    slot 7 gets 8 bytes of r1's page 0 (layer_offset_mismatch, the unowned slot folded in)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5])
    p.alloc("r1", "kv", [1])
    p.write("r1", "kv", [1])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(L, 1), dp.addr(L, 5), 64) for L in range(2)]
    descs += [(sp.addr(1, 1), dp.addr(1, 8), 0), (sp.addr(0, 1), dp.addr(0, 7), 8 if bug else 0)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    finish(p, d, "r1", x, [1], [5])
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "kv", [7])] if bug else []


@case
def legal_descs_reversed_and_coalesced(path, bug=False):
    """A sender's descriptor list in its own order: layer 1 before layer 0, slots last to
    first, and slots 2-3 → 5-6 of layer 0 as one 128-byte entry beside single-slot ones."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6, 7])
    p.alloc("r1", "kv", [2, 3, 4])
    p.write("r1", "kv", [2, 3, 4])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(1, s), dp.addr(1, t), 64) for s, t in ((4, 7), (3, 6), (2, 5))]
    descs += [(sp.addr(0, 4), dp.addr(0, 7), 64), (sp.addr(0, 2), dp.addr(0, 5), 128)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    for L in range(2):   # what prefill wrote (the builder models slot-start descriptors only)
        d.read("r1", "kv", [5, 6, 7], layers=[L], checksums=[b.content[("prefill", "kv", L, s)] for s in (2, 3, 4)])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [2, 3, 4])
    d.free("r1", "kv", [5, 6, 7])
    b.close()
    return []


@case
def legal_prefill_page_split(path, bug=False):
    """Prefill pages hold two decode pages (32 vs 16 tokens): prefill slot s's first half
    goes to decode page 2k, its second half to page 2k+1 (sub-slot source offsets)."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.pool("kv", layers=2, slot_bytes=64, num_slots=8, page_tokens=32)
    d.pool("kv", layers=2, slot_bytes=32, num_slots=8, page_tokens=16)
    handshake(p, d, "r1", [4, 5, 6, 7], pages=[0, 1, 2, 3])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(L, [1, 2][k // 2]) + 32 * (k % 2), dp.addr(L, 4 + k), 32) for L in range(2) for k in range(4)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [4, 5, 6, 7], checksums=[1, 2, 3, 4])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [4, 5, 6, 7])
    b.close()
    return []


# ------------------------------------------------------------------- preemption, aborts
@case
def legal_preempt_recompute(path, bug=False):
    """Decode preempts r1 after reading its received pages (frees them), later resumes it
    on the same slots and recomputes the prompt's KV itself (its own writes of r1's pages),
    then reads: the new slot generation holds decode's own bytes, nothing delivered is lost."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3], reason="preempt")
    d.alloc("r1", "kv", [2, 3])                        # resumed on the same slots
    d.write("r1", "kv", [2, 3])                        # recomputed: r1's KV again
    d.read("r1", "kv", [2, 3])
    d.free("r1", "kv", [2, 3])
    d.req_done("r1")
    b.close()
    return []


@case
def abort_waits_for_write(path, bug=True):
    """Decode aborts r1 while the WRITE into its pages is in flight and tells prefill;
    prefill waits for DONE and answers "finished"; decode frees on that answer and r2 gets
    the pages. The bug frees at once (the WRITE may still land)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [3, 4])
    x1 = push(p, d, "r1", [1, 2], [3, 4])
    d.req_abort("r1")
    if bug:
        d.free("r1", "kv", [3, 4], reason="abort")
    d.msg_send(p, "r1/abort", request="r1")
    p.msg_recv(d, "r1/abort", request="r1")
    p.done(x1, "r1")
    p.release(x1, "r1")
    p.free("r1", "kv", [1, 2], reason="abort")
    p.msg_send(d, "r1/finished", request="r1")
    d.msg_recv(p, "r1/finished", request="r1")
    if not bug:
        d.free("r1", "kv", [3, 4], reason="abort")
    handshake(p, d, "r2", [3, 4])
    x2 = push(p, d, "r2", [5, 6], [3, 4])
    finish(p, d, "r2", x2, [5, 6], [3, 4])
    d.notif_recv(p, b"r1_kv", request="r1")            # r1's notification, late
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [3, 4])] if bug else []


# -------------------------------------------------------------------- clocks that disagree
def _skew_clocks(path: str, shard: str, offset: int, reverse: bool) -> None:
    """Shift one shard's t_ns by ``offset`` (another host's clock) and, with ``reverse``,
    make it run backwards (seq order kept: a clock stepped back by NTP)."""
    p = os.path.join(path, shard, "events.arrows")
    with open(p, "rb") as f:
        t = ipc.open_stream(pa.BufferReader(f.read())).read_all()
    i = t.schema.get_field_index("t_ns")
    ts = pc.add(t.column("t_ns"), pa.scalar(offset, pa.int64()))
    if reverse:
        ts = pa.chunked_array([pa.array(list(reversed(ts.to_pylist())), pa.int64())])
    t = t.set_column(i, t.schema.field("t_ns"), ts.cast(t.schema.field("t_ns").type))
    with pa.OSFile(p, "wb") as f, ipc.new_stream(f, t.schema) as w:
        for batch in t.to_batches(max_chunksize=64):
            w.write_batch(batch)


@case
def skewed_clocks(path, bug=True):
    """Three requests pushed prefill → decode; decode's host clock is 50 s behind and
    prefill's runs backwards, so every timestamp disagrees with the messages' order. The
    bug frees r2's source pages right after the post (src_free_before_done), found from
    happens-before alone."""
    b, p, d = pd(path)
    for req in ("r1", "r2", "r3"):
        handshake(p, d, req, [2, 3])
        x = push(p, d, req, [4, 5], [2, 3])
        if bug and req == "r2":
            p.free(req, "kv", [4, 5], reason="early")
        d.notif_recv(p, f"{req}_kv".encode(), request=req)
        d.read(req, "kv", [2, 3])
        p.done(x, req)
        p.release(x, req)
        if not (bug and req == "r2"):
            p.free(req, "kv", [4, 5])
        d.free(req, "kv", [2, 3])
        d.req_done(req)
    b.close()
    _skew_clocks(path, "decode", -50_000_000_000, reverse=False)
    _skew_clocks(path, "prefill", 0, reverse=True)
    return [("src_free_before_done", "prefill", "r2", "kv", [4, 5])] if bug else []


# ------------------------------------------------------ more sharing, completion and geometry
@case
def prefill_founder_frees_during_share(path, bug=True):
    """Prefill's radix cache: t2 takes a shared reference to t1's prefill page (slot 4) and
    resends it to decode; t1, the founder, drops its reference while t2's WRITE of that
    page is in flight (legal: t2 still holds it). The bug: t2 itself frees the page before
    its WRITE is known complete."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2])
    x = push(p, d, "t1", [4], [2])
    d.notif_recv(p, b"t1_kv", request="t1")
    d.read("t1", "kv", [2])
    p.done(x, "t1")
    p.release(x, "t1")
    d.free("t1", "kv", [2])
    handshake(p, d, "t2", [3])
    p.alloc("t2", "kv", [4], pages=[0], shared=True)
    x2 = p.post("t2", d, src=("kv", [4]), dst=("kv", [3]), msg=b"t2_kv")
    p.free("t1", "kv", [4], reason="finish")          # the founder's reference, t2's WRITE in flight
    if bug:
        p.free("t2", "kv", [4], reason="early")
    d.notif_recv(p, b"t2_kv", request="t2")
    d.read("t2", "kv", [3])
    p.done(x2, "t2")
    p.release(x2, "t2")
    if not bug:
        p.free("t2", "kv", [4])
    d.free("t2", "kv", [3])
    b.close()
    return [("src_free_before_done", "prefill", "t2", "kv", [4])] if bug else []


@case
def notif_after_done(path, bug=True):
    """A sender that posts without a notification, polls DONE, then notifies decode on its
    own (notif_send): decode's read after that notification is ordered after the data. The
    bug notifies right after the post, before DONE."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    x = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=None, deliver="later")
    if bug:
        p.notif_send(d, b"r1_ready", request="r1")
        d.notif_recv(p, b"r1_ready", request="r1")
        d.read("r1", "kv", [2, 3], checksums=[5, 6])
    p.done(x, "r1")
    if not bug:
        p.notif_send(d, b"r1_ready", request="r1")
        d.notif_recv(p, b"r1_ready", request="r1")
        d.read("r1", "kv", [2, 3])
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("read_before_done", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def legal_src_reuse_after_done(path, bug=False):
    """Prefill reuses r1's source pages for r2 as soon as its poll sees DONE, before decode
    has even received r1's notification (DONE at the initiator: the bytes were delivered)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    handshake(p, d, "r2", [6, 7])
    x1 = push(p, d, "r1", [4, 5], [2, 3])
    p.done(x1, "r1")
    p.release(x1, "r1")
    p.free("r1", "kv", [4, 5])
    x2 = push(p, d, "r2", [4, 5], [6, 7])
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    d.notif_recv(p, b"r2_kv", request="r2")
    d.read("r2", "kv", [6, 7])
    p.done(x2, "r2")
    p.release(x2, "r2")
    p.free("r2", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    d.free("r2", "kv", [6, 7])
    b.close()
    return []


@case
def legal_warmup_transfer(path, bug=False):
    """Before serving, the sender pre-touches decode's whole pool with one request-less
    WRITE of zeros (completed, notified), then requests use the pages as usual."""
    b, p, d = pd(path)
    sp, dp = p.pools["kv"], d.pools["kv"]
    w = p.post(None, d, descs=[(sp.addr(L, 0), dp.addr(L, 0), 64 * 8) for L in range(2)], msg=b"warmup")
    d.notif_recv(p, b"warmup")
    p.done(w)
    p.release(w)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    finish(p, d, "r1", x, [4, 5], [2, 3])
    b.close()
    return []


@case
def legal_batched_transfer(path, bug=False):
    """A sender that batches two requests' pages into one posting with no request of its own
    (one notification for both): r1's slots 1 → 2 and r2's slots 3 → 5."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2])
    handshake(p, d, "r2", [5])
    for req, s in (("r1", 1), ("r2", 3)):
        p.alloc(req, "kv", [s])
        p.write(req, "kv", [s])
    x = p.post(None, d, src=("kv", [1, 3]), dst=("kv", [2, 5]), msg=b"batch0")
    d.notif_recv(p, b"batch0")
    d.read("r1", "kv", [2])
    d.read("r2", "kv", [5])
    p.done(x)
    p.release(x)
    for req, s, t in (("r1", 1, 2), ("r2", 3, 5)):
        p.free(req, "kv", [s])
        d.free(req, "kv", [t])
    b.close()
    return []


@case
def legal_tp1_to_tp2_heads(path, bug=False):
    """Prefill TP1 feeds decode TP2: each decode rank (its own agent and shard) keeps half
    the KV heads, so prefill's 64-byte page splits into two 32-byte pages, head half k to
    rank k, in one WRITE per rank."""
    b = TraceBuilder(path)
    p, d0, d1 = b.agent("prefill"), b.agent("decode0"), b.agent("decode1")
    p.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for d in (d0, d1):
        d.pool("kv", layers=2, slot_bytes=32, num_slots=8)
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    sp = p.pools["kv"]
    xs = []
    for k, d in enumerate((d0, d1)):
        handshake(p, d, "r1", [5, 6])
        dp = d.pools["kv"]
        descs = [(sp.addr(L, s) + 32 * k, dp.addr(L, t), 32) for L in range(2) for s, t in ((1, 5), (2, 6))]
        xs.append(p.post("r1", d, descs=descs, msg=f"r1_kv{k}".encode()))
    for k, (d, x) in enumerate(zip((d0, d1), xs)):
        d.notif_recv(p, f"r1_kv{k}".encode(), request="r1")
        d.read("r1", "kv", [5, 6], checksums=[10 + k, 20 + k])
        p.done(x, "r1")
        p.release(x, "r1")
        d.free("r1", "kv", [5, 6])
    p.free("r1", "kv", [1, 2])
    b.close()
    return []


@case
def alloc_without_pages(path, bug=True):
    """An allocator hook that records slots but no page ordinals (allowed: an alloc without
    pages): the slots are the request's, which tokens they hold is unknown, so a plain push
    is clean. The bug sends prefill's second page into decode's slot 6, which r1 does not
    hold: still proven (no page needed to know a slot is not held)."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.rec.event("alloc", "decode", "r1", pool="kv", slots=(2, 3))
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.rec.event("alloc", "prefill", "r1", pool="kv", slots=(4, 5))
    p.write("r1", "kv", [4, 5])
    x = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 6 if bug else 3]), msg=b"r1_kv")
    finish(p, d, "r1", x, [4, 5], [2, 3])
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "kv", [6])] if bug else []


# ------------------------------------------------------------------ the trace's two ends
@case
def teardown_deregister(path, bug=True):
    """Shutdown: every transfer observed complete, then both sides deregister their pool
    memory (decode while r1's pages are still held: nothing is in flight). The bug: prefill
    tears its memory down while r1's WRITE is still in flight."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    sp = p.pools["kv"]
    if bug:
        for L in range(2):
            p.deregister(sp.addr(L, 0), sp.layer_bytes(L))
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    if not bug:
        for L in range(2):
            p.deregister(sp.addr(L, 0), sp.layer_bytes(L))
    dp = d.pools["kv"]
    for L in range(2):
        d.deregister(dp.addr(L, 0), dp.layer_bytes(L))
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("inflight_src_overwritten", "prefill", "r1", "kv", [4, 5])] if bug else []


# ------------------------------------------------------------- more READ mode, allocation
@case
def pull_retry_after_error(path, bug=True):
    """Decode's READ fails (ERR on decode); decode re-posts it, and prefill frees its pages
    on the retry's notification — ordered after the failed READ ended (decode saw its
    error before re-posting). The bug re-posts before the failed READ's end is observed
    (no error seen yet), so prefill's free is not ordered after the first READ."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(d, "r1/ready", request="r1")
    d.msg_recv(p, "r1/ready", request="r1")
    x0 = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1:0", deliver="later")
    if not bug:
        d.error(x0, "r1")
        d.release(x0, "r1")
    x1 = d.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1:1")
    d.done(x1, "r1")
    p.notif_recv(d, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])
    if bug:
        d.error(x0, "r1")
        d.release(x0, "r1")
    d.read("r1", "kv", [5, 6])
    d.release(x1, "r1")
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []


@case
def legal_incremental_alloc(path, bug=False):
    """Decode allocates r1's pages as the chunks come (pages 0-1, then page 2 in another
    slot run) and tells prefill each time; each chunk's WRITE lands in its own pages."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3], pages=[0, 1])
    p.alloc("r1", "kv", [4, 5], pages=[0, 1])
    p.write("r1", "kv", [4, 5])
    x0 = p.post("r1", d, src=("kv", [4, 5]), dst=("kv", [2, 3]), msg=b"r1_kv0")
    d.alloc("r1", "kv", [6], pages=[2])
    d.msg_send(p, "r1/pages2", request="r1")
    p.msg_recv(d, "r1/pages2", request="r1")
    p.alloc("r1", "kv", [1], pages=[2])
    p.write("r1", "kv", [1])
    x1 = p.post("r1", d, src=("kv", [1]), dst=("kv", [6]), msg=b"r1_kv1")
    for m in (b"r1_kv0", b"r1_kv1"):
        d.notif_recv(p, m, request="r1")
    d.read("r1", "kv", [2, 3, 6])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 4, 5])
    d.free("r1", "kv", [2, 3, 6])
    b.close()
    return []


@case
def legal_full_prefix_hit(path, bug=False):
    """t2's whole prompt is in decode's prefix cache (t1's delivered pages): decode takes
    shared references and reads them with no transfer at all."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3])
    d.notif_recv(p, b"t1_kv", request="t1")
    d.read("t1", "kv", [2, 3])
    p.done(x, "t1")
    p.release(x, "t1")
    p.free("t1", "kv", [4, 5])
    d.req_start("t2")
    d.alloc("t2", "kv", [2, 3], pages=[0, 1], shared=True)
    d.free("t1", "kv", [2, 3])
    d.read("t2", "kv", [2, 3])
    d.free("t2", "kv", [2, 3])
    d.req_done("t2")
    b.close()
    return []


@case
def alloc_without_pages_layers_swapped(path, bug=True):
    """alloc_without_pages, whose bug here swaps the layers: each source layer lands in the
    other destination layer. Which tokens a slot holds is unknown without pages, but the
    layers are not: the swap is still proven."""
    b, p, d = pd(path)
    d.req_start("r1")
    d.rec.event("alloc", "decode", "r1", pool="kv", slots=(2, 3))
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.rec.event("alloc", "prefill", "r1", pool="kv", slots=(4, 5))
    p.write("r1", "kv", [4, 5])
    x = p.post("r1", d, src=("kv", [4, 5], [0, 1]), dst=("kv", [2, 3], [1, 0] if bug else [0, 1]), msg=b"r1_kv")
    finish(p, d, "r1", x, [4, 5], [2, 3])
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "kv", [2, 3])] if bug else []
