"""Scenarios of issue 16's answers, written from real upstream bugs, each with clean twins:
who wrote the bytes a corrupted read holds (attribution), the owner overwriting delivered
bytes before its first read, buffer classes the two sides disagree on, and requests left
waiting at trace end. Registered in ``CASES`` like every other scenario."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, finish, handshake, pd, push


# ------------------------------------------------------------ who wrote these bytes
@case
def early_src_free_reused(path, bug=True):
    """Prefill frees r1's source pages right after the post; r2 takes and fills them before
    the WRITE moves them, so decode reads r2's bytes as r1's (ai-dynamo/dynamo #826)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv", deliver="later")
    if bug:
        p.free("r1", "kv", [1, 2], reason="sent")
        p.alloc("r2", "kv", [1, 2])
        p.write("r2", "kv", [1, 2])
    x.deliver()
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6])
    p.done(x, "r1")
    p.release(x, "r1")
    if not bug:
        p.free("r1", "kv", [1, 2])
        p.alloc("r2", "kv", [1, 2])
        p.write("r2", "kv", [1, 2])
    p.free("r2", "kv", [1, 2])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("src_free_before_done", "prefill", "r1", "kv", [1, 2])] if bug else []


@case
def abort_late_write_next_owner(path, bug=True):
    """Decode aborts r1 and frees its pages while the WRITE is in flight; r2 gets them, its
    own data lands, then r1's late bytes land on top: r2 reads r1's bytes
    (sgl-project/sglang #24527, vllm-project/vllm #46283)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [3, 4])
    x1 = push(p, d, "r1", [1, 2], [3, 4], deliver="later")
    if bug:
        d.req_abort("r1")
        d.free("r1", "kv", [3, 4], reason="abort")
    else:
        d.notif_recv(p, b"r1_kv", request="r1")
        x1.deliver()
        d.req_abort("r1")
        d.free("r1", "kv", [3, 4], reason="abort")
    handshake(p, d, "r2", [3, 4])
    x2 = push(p, d, "r2", [5, 6], [3, 4], msg=b"r2_kv")
    if bug:
        x1.deliver()                        # the aborted request's late bytes
    d.notif_recv(p, b"r2_kv", request="r2")
    d.read("r2", "kv", [3, 4])
    if bug:
        d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x1, "r1")
    p.release(x1, "r1")
    p.free("r1", "kv", [1, 2])
    p.done(x2, "r2")
    p.release(x2, "r2")
    p.free("r2", "kv", [5, 6])
    d.free("r2", "kv", [3, 4])
    d.req_done("r2")
    b.close()
    return [("write_after_free", "decode", "r1", "kv", [3, 4])] if bug else []


# ------------------------------------------------ owner overwrites delivered bytes
def _hybrid(path):
    return pd(path, pools=(("kv", 2, 64, 8), ("mamba", 2, 256, 4)))


@case
def hybrid_decode_clears_state(path, bug=True):
    """A hybrid model's decode clears (zero-initializes) the request's recurrent state slot
    after the state transfer landed and before the first decode step reads it
    (sgl-project/sglang #32995). Twin: the slot is cleared when allocated, before the page
    message that lets prefill post."""
    b, p, d = _hybrid(path)
    d.req_start("r1")
    d.alloc("r1", "kv", [4, 5])
    d.alloc("r1", "mamba", [2])
    if not bug:
        d.write("r1", "mamba", [2], checksums=[0xC1EA2])    # init on alloc (a cleared state)
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.alloc("r1", "kv", [1, 2])
    p.alloc("r1", "mamba", [0])
    p.write("r1", "kv", [1, 2])
    p.write("r1", "mamba", [0])
    xk = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [4, 5]), msg=b"r1_kv")
    xs = p.post("r1", d, src=("mamba", [0]), dst=("mamba", [2]), msg=b"r1_state")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.notif_recv(p, b"r1_state", request="r1")
    if bug:
        d.write("r1", "mamba", [2], checksums=[0xC1EA2])          # the clear lands on the received state
    d.read("r1", "kv", [4, 5])
    d.read("r1", "mamba", [2])
    for x in (xk, xs):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    p.free("r1", "mamba", [0])
    d.free("r1", "kv", [4, 5])
    d.free("r1", "mamba", [2])
    d.req_done("r1")
    b.close()
    return [("owner_overwrites_delivered", "decode", "r1", "mamba", [2])] if bug else []


@case
def mtp_pad_overwrites_kv(path, bug=True):
    """Decode runs the prompt's tail as a padded MTP step before its first real step; the
    padding's KV writes cover the last two prompt pages, so the received page 1 is
    overwritten (vllm-project/vllm PR #47466). Twin: the step writes only into the partly
    filled last page (an append)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6, 7], pages=[0, 1, 2])
    x = push(p, d, "r1", [1, 2, 3], [5, 6, 7])
    p.pages.update({("r1", "kv", s): i for i, s in enumerate([1, 2, 3])})
    d.notif_recv(p, b"r1_kv", request="r1")
    if bug:
        d.write("r1", "kv", [6, 7], pages=[1, 2], checksums=[11, 12])
    else:
        d.write("r1", "kv", [7], pages=[2], checksums=[12])
    d.read("r1", "kv", [5, 6, 7])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6, 7])
    d.req_done("r1")
    b.close()
    return [("owner_overwrites_delivered", "decode", "r1", "kv", [6])] if bug else []


@case
def mtp_pad_overwrites_two_pages(path, bug=True):
    """mtp_pad_overwrites_kv where the padding covers three pages, two of them received,
    which came by two transfers (chunks): the finding names pages 0,1 and both transfers
    (it named one page and one transfer, arg_min over a tie: one write event covers every
    page). Twin: the append into the last page only."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6, 7], pages=[0, 1, 2])
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    x0 = p.post("r1", d, src=("kv", [1]), dst=("kv", [5]), msg=b"r1_kv_0")
    x1 = p.post("r1", d, src=("kv", [2, 3]), dst=("kv", [6, 7]), msg=b"r1_kv_1")
    for m in (b"r1_kv_0", b"r1_kv_1"):
        d.notif_recv(p, m, request="r1")
    if bug:
        d.write("r1", "kv", [5, 6, 7], pages=[0, 1, 2], checksums=[10, 11, 12])
    else:
        d.write("r1", "kv", [7], pages=[2], checksums=[12])
    d.read("r1", "kv", [5, 6, 7])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6, 7])
    d.req_done("r1")
    b.close()
    return [("owner_overwrites_delivered", "decode", "r1", "kv", [5, 6])] if bug else []


@case
def legal_prefix_page_next_turn_writes(path, bug=False):
    """Turn 2 shares turn 1's received pages through the prefix cache and writes its new
    tokens into the shared last page before its first read: the bytes were delivered to
    (and read by) turn 1, so nothing delivered is lost."""
    b, p, d = pd(path)
    handshake(p, d, "t1", [2, 3])
    x = push(p, d, "t1", [4, 5], [2, 3], msg=b"t1_kv")
    d.notif_recv(p, b"t1_kv", request="t1")
    d.read("t1", "kv", [2, 3])
    p.done(x, "t1")
    p.release(x, "t1")
    p.free("t1", "kv", [4, 5])
    d.req_done("t1")
    d.req_start("t2")
    d.alloc("t2", "kv", [2, 3], pages=[0, 1], shared=True)
    d.free("t1", "kv", [2, 3])
    d.write("t2", "kv", [2, 3], pages=[0, 1], checksums=[21, 22])   # new tokens over the shared pages
    d.read("t2", "kv", [2, 3])
    d.free("t2", "kv", [2, 3])
    d.req_done("t2")
    b.close()
    return []


# ------------------------------------------------------------ liveness at trace end
@case
def dropped_completion_notification(path, bug=True):
    """Prefill's WRITE completes (DONE) but its notification never reaches decode, which
    keeps the request's pages waiting forever (NVIDIA/TensorRT-LLM #17665)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    if not bug:
        d.notif_recv(p, b"r1_kv", request="r1")
        d.read("r1", "kv", [2, 3])
        d.free("r1", "kv", [2, 3])
        d.req_done("r1")
    b.close()
    return [("request_waiting", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def prefill_failure_not_signalled(path, bug=True):
    """Prefill fails the request after decode sent its pages and never tells decode, which
    waits on pages nobody will fill (sgl-project/sglang PR #36108). Twin: prefill sends the
    failure and decode aborts and frees."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.req_start("r1")
    p.alloc("r1", "kv", [4, 5])
    p.req_abort("r1", reason="failed")
    p.free("r1", "kv", [4, 5], reason="failed")
    if not bug:
        p.msg_send(d, "r1/failed", request="r1")
        d.msg_recv(p, "r1/failed", request="r1")
        d.req_abort("r1", reason="prefill failed")
        d.free("r1", "kv", [2, 3], reason="abort")
    b.close()
    return [("request_waiting", "decode", "r1", "kv", [2, 3])] if bug else []


@case
def abort_while_waiting_leaks(path, bug=True):
    """Decode aborts r1 while waiting for its remote KV; the WRITE then fails on prefill,
    decode is never told and its blocks stay held (vllm-project/vllm #46283). Twin: the
    failure is reported and decode frees."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    x = push(p, d, "r1", [4, 5], [2, 3], deliver="later")
    d.req_abort("r1")
    p.error(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    if not bug:
        p.msg_send(d, "r1/xfer-failed", request="r1")
        d.msg_recv(p, "r1/xfer-failed", request="r1")
        d.free("r1", "kv", [2, 3], reason="abort")
    b.close()
    return [("request_waiting", "decode", "r1", "kv", [2, 3])] if bug else []


# ------------------------------------------------ layouts and configs of the two sides
def _two_geometries(path, pool, src, dst, layers=2, num_slots=8):
    """prefill and decode with a kv pool alike and ``pool`` as (slot_bytes, page_tokens, dtype) each."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side, (sb, pt, dt) in ((p, src), (d, dst)):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
        side.pool(pool, layers=layers, slot_bytes=sb, num_slots=num_slots, page_tokens=pt, dtype=dt)
    return b, p, d


def _send_item_len(b, p, d, pool, item_len):
    """r1's kv pages and ``pool`` pages, descriptors of prefill's item length."""
    d.alloc("r1", pool, [2, 3])
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.alloc("r1", pool, [4, 5])
    p.write("r1", "kv", [4, 5])
    p.write("r1", pool, [4, 5])
    sp, dp = p.pools[pool], d.pools[pool]
    kv = [(p.pools["kv"].addr(L, s), d.pools["kv"].addr(L, t), 64) for L in range(2) for s, t in ((4, 2), (5, 3))]
    ik = [(sp.addr(L, s), dp.addr(L, t), item_len) for L in range(sp.layers) for s, t in ((4, 2), (5, 3))]
    x = p.post("r1", d, descs=kv + ik, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [2, 3])
    p.done(x, "r1")
    p.release(x, "r1")
    for pl in ("kv", pool):
        p.free("r1", pl, [4, 5])
        d.free("r1", pl, [2, 3])
    d.req_done("r1")
    b.close()


@case
def bf16_prefill_fp8_decode(path, bug=True):
    """Prefill stores the DSA indexer keys as bf16 (256 B a page), decode as fp8 (128 B);
    the descriptors take prefill's item length and run over decode's pages
    (sgl-project/sglang PR #19398). Twin: both sides fp8."""
    src = (256, 64, "bf16") if bug else (128, 64, "fp8")
    b, p, d = _two_geometries(path, "index_k", src, (128, 64, "fp8"))
    _send_item_len(b, p, d, "index_k", src[0])
    return [("layout_mismatch", "decode", "r1", "index_k", [])] if bug else []


@case
def hybrid_config_mismatch(path, bug=True):
    """Prefill and decode run the hybrid model with different state configs: prefill's
    state slot is 512 B, decode's 256 B, and each transfer copies prefill's 512 B into a
    256-byte slot (ai-dynamo/dynamo PR #12821). Twin: the same config on both sides."""
    b, p, d = _two_geometries(path, "mamba", (512, 1, "bf16"), (256 if bug else 512, 1, "bf16"), layers=1)
    _send_item_len(b, p, d, "mamba", 512)
    return [("layout_mismatch", "decode", "r1", "mamba", [])] if bug else []


@case
def legal_hetero_tp_head_split(path, bug=False):
    """Decode (TP1) gathers each page from two prefill ranks (TP2): half the heads each, so
    decode's bytes per token are twice a rank's, and each rank's item lands inside decode's
    slot — consistent with the geometry."""
    b = TraceBuilder(path)
    ranks = [b.agent(f"prefill{i}") for i in range(2)]
    d = b.agent("decode")
    for r in ranks:
        r.pool("kv", layers=2, slot_bytes=32, num_slots=8)
    d.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    d.req_start("r1")
    d.alloc("r1", "kv", [2, 3])
    xs = []
    for i, r in enumerate(ranks):
        d.msg_send(r, f"r1/pages/{i}", request="r1")
        r.msg_recv(d, f"r1/pages/{i}", request="r1")
        r.alloc("r1", "kv", [4, 5])
        r.write("r1", "kv", [4, 5])
        descs = [(r.pools["kv"].addr(L, s), d.pools["kv"].addr(L, t) + 32 * i, 32)
                 for L in range(2) for s, t in ((4, 2), (5, 3))]
        xs.append((r, r.post("r1", d, descs=descs, msg=f"r1_kv_{i}".encode())))
    for i, (r, x) in enumerate(xs):
        d.notif_recv(r, f"r1_kv_{i}".encode(), request="r1")
    d.read("r1", "kv", [2, 3], checksums=[7, 8])   # the two halves together
    for r, x in xs:
        r.done(x, "r1")
        r.release(x, "r1")
        r.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    d.req_done("r1")
    b.close()
    return []


def _dropped(path, pool, slot_bytes, bug):
    """kv always sent; ``pool`` registered on both sides, sent only by the twin."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), (pool, 2, slot_bytes, 4)))
    d.alloc("r1", pool, [1])
    handshake(p, d, "r1", [4, 5])
    p.alloc("r1", "kv", [1, 2])
    p.alloc("r1", pool, [3])
    p.write("r1", "kv", [1, 2])
    p.write("r1", pool, [3])
    xs = [p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [4, 5]), msg=b"r1_kv")]
    if not bug:
        xs.append(p.post("r1", d, src=(pool, [3]), dst=(pool, [1]), msg=b"r1_" + pool.encode()))
    for x in xs:
        d.notif_recv(p, b"r1_kv" if x is xs[0] else b"r1_" + pool.encode(), request="r1")
    d.read("r1", "kv", [4, 5])
    d.read("r1", pool, [1])
    for x in xs:
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    p.free("r1", pool, [3])
    d.free("r1", "kv", [4, 5])
    d.free("r1", pool, [1])
    d.req_done("r1")
    b.close()
    return [("buffer_class_not_sent", "decode", "r1", pool, [1])] if bug else []


@case
def state_buffers_dropped(path, bug=True):
    """A hybrid model's state buffers are registered on both sides, but the transfer only
    carries the KV pages; decode starts from whatever the state slot held
    (sgl-project/sglang PR #23773)."""
    return _dropped(path, "mamba", 256, bug)


@case
def indexer_buffers_dropped(path, bug=True):
    """The same with the DSA indexer's index_k pages: registered on both sides, read by
    decode's sparse attention, never sent (the class dropped from the transfer list)."""
    return _dropped(path, "index_k", 128, bug)
