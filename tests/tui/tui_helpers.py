"""Scenario traces and pilot helpers for the TUI tests, written through the real Recorder by TraceBuilder.

``clean``: prefill writes r1's two pages, pushes them to decode, decode is notified,
prefill sees DONE, then frees; decode reads and frees.
``early_free``: the same, except prefill frees r1's source slots right after posting
and hands them to r2, which overwrites them while the transfer is still in flight
(dynamo #826: the src_free_before_done hazard).
"""
from __future__ import annotations

import asyncio
import functools
import time

from kvtrace.tracer.builder import TraceBuilder


def build(path, early_free: bool) -> str:
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    p.req_start("r1"); d.req_start("r1")
    d.alloc("r1", "kv", [5, 6])
    d.msg_send(p, "r1-pages", b"5,6", request="r1")
    p.msg_recv(d, "r1-pages", b"5,6", request="r1")
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    x = p.post("r1", d, src=("kv", [1, 2]), dst=("kv", [5, 6]), msg=b"r1_kv_0_1_0", deliver="later")
    if early_free:
        p.free("r1", "kv", [1, 2])
        p.req_start("r2")
        p.alloc("r2", "kv", [1, 2])
        p.write("r2", "kv", [1, 2])
    x.deliver()
    d.notif_recv(p, b"r1_kv_0_1_0", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    if not early_free:
        p.free("r1", "kv", [1, 2])
    p.req_done("r1")
    d.read("r1", "kv", [5, 6])
    d.free("r1", "kv", [5, 6])
    d.req_done("r1")
    if early_free:
        p.free("r2", "kv", [1, 2])
        p.req_done("r2")
    return b.close()


async def wait_for(pilot, cond, timeout: float = 60.0) -> None:
    """Let the app run until ``cond()`` holds (workers, timers), failing after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await pilot.pause(0.02)
    await asyncio.sleep(0)


def sync(fn):
    """Run an async pilot test with asyncio.run (no pytest-asyncio needed)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))
    return wrapper
