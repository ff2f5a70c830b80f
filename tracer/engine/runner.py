"""Drives prefill and decode in lock-step, in one process or in two.

A step is: decode (aborts, timeouts, admissions) -> its control messages -> prefill
(forward, transfer worker posts, polls) -> prefill's messages and the count of
notifications it has posted -> decode waits for exactly those notifications, then
completes, reads, finishes. Real NIXL moves the bytes; the order of decisions comes
from the workload seed, so timing-dependent bugs bite the same way on every run.

Two processes: the launcher runs decode and spawns prefill; NIXL metadata goes over
the agents' loopback listener ports, control messages over a local socket.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import socket
import time

from .. import manifest
from ..recorder import Recorder

MAX_STEPS = 200_000


def free_port() -> int:
    """A free loopback TCP port (never a fixed one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _recorder(trace_dir, shard, extra=None, ring=None):
    if trace_dir is None:
        return None
    if ring:
        from ..ring import RingRecorder
        return RingRecorder(trace_dir, shard, ring=ring, manifest_extra=extra)
    return Recorder(trace_dir, shard, manifest_extra=extra)


def _result(decode, steps: int, t0: float) -> dict:
    out = decode.verifier.summary()
    out.update(steps=steps, seconds=time.monotonic() - t0, requests=decode.total, **decode.stats)
    return out


def run_inprocess(wl, bugs=(), trace_dir=None, device="cpu", on_step=None, checksums=True, ring=None) -> dict:
    """Prefill and decode agents in this process; shards 'prefill' and 'decode'."""
    from .decode import DecodeWorker
    from .prefill import PrefillWorker
    t0 = time.monotonic()
    if trace_dir is not None and not ring:
        manifest.expect_shards(trace_dir, ["prefill", "decode"])
    if trace_dir is not None and ring:   # two rings share this process's SIZE: refuse one too small first
        from ..ring import check_ring
        check_ring(ring, shards=2)
    rp, rd = _recorder(trace_dir, "prefill", ring=ring), _recorder(trace_dir, "decode", ring=ring)
    try:
        p = PrefillWorker(wl, bugs, rp, device, checksums=checksums)
        d = DecodeWorker(wl, bugs, rd, device, checksums=checksums)
        p.agent.add_remote_agent(d.agent.get_agent_metadata())
        d.agent.add_remote_agent(p.agent.get_agent_metadata())
        p.progress = d.pump
        d.registration()
        k = 0
        while not (d.done() and p.idle()):
            msgs, posted = p.step(k, d.begin_step(k))
            d.end_step(k, msgs, posted)
            k += 1
            if on_step:
                on_step(d.finished, d.total)
            if k > MAX_STEPS:
                raise RuntimeError("engine made no progress")
        d.close()
        return _result(d, k, t0)
    finally:
        for r in (rp, rd):
            if r is not None:
                r.close()


def _prefill_main(wl, bugs, trace_dir, device, ports, ctl_addr, authkey, checksums=True, ring=None) -> None:
    """The prefill process: its own agent (listener), recorder shard and control socket."""
    from multiprocessing.connection import Client

    from .prefill import PrefillWorker
    os.environ.setdefault("NIXL_LOG_LEVEL", "WARN")
    rec = _recorder(trace_dir, "prefill", ring=ring)
    try:
        p = PrefillWorker(wl, bugs, rec, device, listen_port=ports["prefill"], checksums=checksums)
        with Client(ctl_addr, authkey=authkey) as conn:
            p.agent.fetch_remote_metadata("decode", "127.0.0.1", ports["decode"])
            p.agent.send_local_metadata("127.0.0.1", ports["decode"])
            _wait_metadata(p.agent, "decode")
            conn.send(("ready",))
            while True:
                frame = conn.recv()
                if frame[0] == "stop":
                    conn.send(("idle", p.idle()))
                    break
                _, k, msgs = frame
                conn.send(p.step(k, msgs) + (p.idle(),))
    finally:
        if rec is not None:
            rec.close()


def _wait_metadata(agent, peer: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not agent.check_remote_metadata(peer):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{agent.name}: no NIXL metadata from {peer}")
        time.sleep(0.005)


def run_two_processes(wl, bugs=(), trace_dir=None, device="cpu", on_step=None, checksums=True, ring=None) -> dict:
    """Prefill in a spawned OS process, decode here; one shard each."""
    from multiprocessing.connection import Listener

    from .decode import DecodeWorker
    t0 = time.monotonic()
    if trace_dir is not None and not ring:
        manifest.expect_shards(trace_dir, ["prefill", "decode"])
    ports = {"prefill": free_port(), "decode": free_port()}
    authkey = os.urandom(16)
    rd = _recorder(trace_dir, "decode", ring=ring)
    child = None
    try:
        with Listener(("127.0.0.1", 0), authkey=authkey) as lst:
            ctx = mp.get_context("spawn")
            child = ctx.Process(target=_prefill_main, name="kvtrace-prefill",
                                args=(wl, tuple(bugs), trace_dir, device, ports, lst.address, authkey, checksums, ring))
            child.start()
            d = DecodeWorker(wl, bugs, rd, device, listen_port=ports["decode"], checksums=checksums)
            with lst.accept() as conn:
                _expect(conn, child, "ready")
                _wait_metadata(d.agent, "prefill")
                d.registration()
                k, p_idle = 0, False
                while not (d.done() and p_idle):
                    conn.send(("step", k, d.begin_step(k)))
                    msgs, posted, p_idle = _expect(conn, child, pump=d.pump)
                    d.end_step(k, msgs, posted)
                    k += 1
                    if on_step:
                        on_step(d.finished, d.total)
                    if k > MAX_STEPS:
                        raise RuntimeError("engine made no progress")
                conn.send(("stop",))
                _expect(conn, child, "idle")
            d.close()
            child.join(60)
            if child.exitcode != 0:
                raise RuntimeError(f"prefill process exited with {child.exitcode}")
            return _result(d, k, t0)
    finally:
        if child is not None and child.is_alive():
            child.kill()
        if rd is not None:
            rd.close()


def _expect(conn, child, tag=None, timeout: float = 120.0, pump=None):
    """The next frame from prefill, or an error if the process died."""
    deadline = time.monotonic() + timeout
    n = 0
    while not conn.poll(0 if pump else 0.05):
        if pump is not None:
            pump()                        # decode's agent must progress for prefill's WRITEs to finish
        n += 1
        if n % 256 == 0 and (not child.is_alive() or time.monotonic() > deadline):
            raise RuntimeError(f"prefill process stopped (exit code {child.exitcode})")
    frame = conn.recv()
    if tag is not None and frame[0] != tag:
        raise RuntimeError(f"prefill sent {frame[0]!r}, expected {tag!r}")
    return frame
