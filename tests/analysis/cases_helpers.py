"""Shared pieces of the analysis scenarios: the registry (``CASES``, ``XFAIL``) and the
steps every PD scenario repeats (the pair of agents, the page handshake, a push, the clean
tail). The scenarios themselves live in ``cases_<family>.py``, one module per check family."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

CASES: dict[str, "callable"] = {}
#: (scenario, bug) -> why that twin is expected to fail today (a strict xfail)
XFAIL: dict[tuple[str, bool], str] = {}


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
