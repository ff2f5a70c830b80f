"""Scenarios of issue 16's answers, written from real upstream bugs, each with clean twins:
who wrote the bytes a corrupted read holds (attribution), the owner overwriting delivered
bytes before its first read, buffer classes the two sides disagree on, and requests left
waiting at trace end. Registered in ``CASES`` like every other scenario."""
from __future__ import annotations

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
