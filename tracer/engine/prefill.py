"""The prefill side: computes KV (provenance content), sends it in chunked prepped WRITEs.

Per step: take delivery of decode's control messages; run chunked prefill under a token
budget (each chunk's pages are written, then handed to the transfer worker); the
transfer worker posts what was handed to it ``post_delay`` steps ago (tags
``{room}_kv_{chunk}_{is_last}_0``, ``{room}_state_0_0``, ``{room}_aux``); poll every
handle with ``check_xfer_state`` to DONE, release it; free the request's pages when all
its handles are DONE. Aborts from decode take effect after a seeded delay (the slow
control path); prefill then stops, waits for what is in flight, frees and acks.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import time

import numpy as np

from ..schema import EventKind as K
from .inject import Injection
from . import nixlio
from .chunks import chunk_positions, prepped_indices
from .geometry import pages_for, side_pools, used_tokens
from .memory import Memory, PageAllocator
from .workload import plan

AGENT = "prefill"


@dataclasses.dataclass
class _Req:
    room: int
    key: str
    tokens: int
    start: dict                          # pool -> first page ordinal to send
    dst: dict                            # pool -> decode slots (parallel to pages from start)
    src: dict = dataclasses.field(default_factory=dict)
    freed: dict = dataclasses.field(default_factory=dict)   # pool -> slots already returned (early free)
    chunks: int = 0
    next_chunk: int = 0
    queued: int = 0                      # handed to the transfer worker, not yet posted
    inflight: list = dataclasses.field(default_factory=list)
    abort_at: int | None = None          # decode asked to abort; takes effect at this step
    aborted: bool = False
    failed: bool = False
    stall: tuple | None = None           # (after chunk, until step): a slow prefill
    acked: bool = False                  # free-on-received: decode acknowledged 'sent'


class _NoLock:
    """A lock that is not one (one thread calls NIXL unless free-on-received)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class PrefillWorker:
    """One prefill instance: pools, allocators, agent, chunked sender."""

    def __init__(self, wl, bugs=(), rec=None, device: str = "cpu", listen_port: int | None = None,
                 checksums: bool = True):
        self.wl, self.rec = wl, rec
        self.bugs = Injection(bugs, wl.engine.get("inject_after", 0))
        self.checksums = checksums   # kvh64 on write/read events (off: null checksums, cheaper)
        self.pools = {p.name: p for p in side_pools(wl, "prefill")}
        self.mem = Memory(self.pools.values(), device)
        self.alloc = {n: PageAllocator(p.num_slots) for n, p in self.pools.items()}
        self.agent = nixlio.make_agent(AGENT, rec, listen_port=listen_port)
        nixlio.register(self.agent, self.mem, rec)
        self.mail = nixlio.Mailbox(AGENT, "decode", rec)
        self.rng = np.random.default_rng([wl.seed, 2])
        e = wl.engine
        self.cp, self.budget, self.post_delay = int(e["chunk_pages"]), int(e["prefill_step_tokens"]), int(e["post_delay"])
        self.abort_delay, self.timeout = tuple(e["abort_delay"]), int(e["timeout_steps"])
        self.fates = {t.room: t.fate for s in plan(wl) for t in s}
        self.reqs: dict[int, _Req] = {}
        self.waiting: list[_Req] = []
        self.queue: collections.deque = collections.deque()   # (ready_step, room, chunk)
        self.posted = 0                                         # notifications sent so far
        self._jobs = None                                       # free-on-received: the transfer worker's queue
        self._nixl = _NoLock()                                  # free-on-received: two threads call NIXL
        if "free-on-received" in self.bugs.names:
            import threading
            self._nixl = threading.Lock()
        local = {"kv": nixlio.describe(self.mem.kv_regions()),
                 "state": nixlio.describe(self.mem.regions["state"]), "aux": nixlio.describe(self.mem.regions["aux"])}
        self.local = local
        self.src_dl = {g: nixlio.prep(self.agent, "", d) for g, d in local.items()}
        self.src_off = nixlio.region_offsets(local["kv"], "uniform-slot-count" in self.bugs)
        #: called while a handle is PROC: lets the target progress (in-process: decode's
        #: agent; between processes the decode process keeps progressing on its own)
        self.progress = lambda: time.sleep(20e-6)

    # ------------------------------------------------------------------ messages
    def _on_register(self, m: dict) -> None:
        self.remote = {g: m[g] for g in ("kv", "state", "aux")}
        self.dst_dl = {g: nixlio.prep(self.agent, m["agent"], d) for g, d in self.remote.items()}
        self.dst_off = nixlio.region_offsets(self.remote["kv"], "uniform-slot-count" in self.bugs)

    def _on_pages(self, m: dict, k: int) -> None:
        r = _Req(m["room"], str(m["room"]), m["tokens"], m["start"], m["dst"])
        kv = self.pools["kv"]
        r.chunks = -(-(pages_for(r.tokens, kv.page_tokens) - r.start["kv"]) // self.cp)
        if self.fates.get(r.room) == "timeout":   # this prefill is slow for this request
            r.stall = (0, k + 2 * self.timeout)
        with self._req(r):
            self.rec and self.rec.event(K.REQ_START, AGENT, r.key, detail={"tokens": r.tokens, "chunks": r.chunks})
        self.reqs[r.room] = r
        self.waiting.append(r)
        self.bugs.start()

    def _on_abort(self, m: dict, k: int) -> None:
        r = self.reqs.get(m["room"])
        if r is None:                  # already finished: nothing of it is in flight
            self.mail.send("abort_ack", m["room"])
            return
        r.abort_at = k + int(self.rng.integers(self.abort_delay[0], self.abort_delay[1] + 1))

    def _on_received(self, m: dict) -> None:
        """``free-on-received``: decode acknowledged the 'sent' status, so the source
        pages go back now -- but the acknowledgement follows the status message, not
        the bytes: nothing orders this free after the DMA (latent; see engine/__init__)."""
        r = self.reqs.get(m["room"])
        if r is None or r.aborted or r.failed:
            return
        r.acked = True
        with self._req(r):
            for pool, slots in r.src.items():
                done = r.freed.get(pool, ())
                self._free(r, pool, [s for s in slots if s not in done], "received")

    # ------------------------------------------------------------------ the step
    def step(self, k: int, msgs: list[dict]) -> tuple[list[dict], int]:
        """One step; returns the control messages for decode and the notifications
        posted so far (decode waits until it has received that many)."""
        for m in msgs:
            self.mail.received(m)
            if m["type"] == "register":
                self._on_register(m)
            elif m["type"] == "pages":
                self._on_pages(m, k)
            elif m["type"] == "abort":
                self._on_abort(m, k)
            elif m["type"] == "received":
                self._on_received(m)
        for r in list(self.reqs.values()):
            if r.abort_at is not None and r.abort_at <= k and not r.aborted:
                r.aborted = True
        self._forward(k)
        self._post(k)
        self._poll()
        return self.mail.take(), self.posted

    def _req(self, r):
        return self.rec.request(r.key) if self.rec is not None else contextlib.nullcontext()

    def _forward(self, k: int) -> None:
        budget = self.budget
        for r in list(self.waiting):
            if budget <= 0:
                break
            if r.aborted or r.failed:
                self.waiting.remove(r)
                continue
            if r.stall and r.next_chunk > r.stall[0] and k < r.stall[1]:
                continue
            if not r.src and not self._alloc(r):
                break                           # head-of-line: wait for pages
            if r.failed:
                self.waiting.remove(r)
                continue
            # chunked prefill: one chunk of each scheduled request per forward step
            budget -= self._compute_chunk(r, r.next_chunk, k)
            r.next_chunk += 1
            if r.next_chunk == r.chunks:
                self.waiting.remove(r)

    def _alloc(self, r: _Req) -> bool:
        need = {"kv": len(r.dst["kv"]), "index_k": len(r.dst["index_k"]), "state": 1, "aux": 1}
        if any(self.alloc[p].num_slots < n for p, n in need.items()):
            r.failed = True            # larger than this prefill's whole pool
            return True
        if any(self.alloc[p].available < n for p, n in need.items()):
            return False
        for p, n in need.items():
            r.src[p] = self.alloc[p].alloc(n)
        if self.rec is not None:   # one call per request: the same rows as rec.alloc per pool
            self.rec.allocs(AGENT, r.key, [(p, r.src[p], range(r.start[p], r.start[p] + n)) for p, n in need.items()])
        return True

    def _chunk_pages(self, r: _Req, c: int) -> dict:
        """Positions (into r.dst/r.src lists) of each pool's pages sent by chunk c."""
        n = {p: len(r.dst[p]) for p in ("kv", "index_k")}
        pt = {p: self.pools[p].page_tokens for p in ("kv", "index_k")}
        return chunk_positions(n, r.start, pt, self.cp, r.chunks, c)

    def _compute_chunk(self, r: _Req, c: int, k: int) -> int:
        """The forward pass of chunk c: write its pages, hand it to the transfer worker."""
        parts = self._chunk_pages(r, c)
        for pool, pos in parts.items():
            if pos:
                self._write(r, pool, pos)
        self.queue.append((k + self.post_delay, r.room, c))
        r.queued += 1
        if "early-src-free" in self.bugs:       # bug: pages go back at send, not at DONE
            for pool, pos in parts.items():
                if pos:
                    self._free(r, pool, [r.src[pool][i] for i in pos], "sent")
        kvp = self.pools["kv"].page_tokens
        return len(parts["kv"]) * kvp

    def _write(self, r: _Req, pool: str, pos: list[int]) -> None:
        p = self.pools[pool]
        pages = [r.start[pool] + i for i in pos]
        slots = [r.src[pool][i] for i in pos]
        last_used = used_tokens(r.tokens, p.page_tokens, pages[-1]) if pool in ("kv", "index_k") else 1
        for layer in range(p.layers):
            self.mem.region(pool, layer).fill(slots, r.key, layer, pages, last_used * p.token_bytes)
        if self.rec is not None:
            cs = self.mem.layer_checksums(pool, slots).tolist() if self.checksums else None
            self.rec.layers(K.WRITE, AGENT, r.key, pool, p.layers, slots, pages, cs)   # one write per layer

    def _free(self, r: _Req, pool: str, slots, reason: str) -> None:
        if not slots:
            return
        self.alloc[pool].unref(slots)
        r.freed.setdefault(pool, set()).update(slots)
        if self.rec is not None:
            self.rec.free(AGENT, r.key, pool, slots, reason=reason)

    def _post(self, k: int) -> None:
        """The transfer worker: post every chunk handed over at least post_delay steps ago."""
        ready = []
        while self.queue and self.queue[0][0] <= k:
            ready.append(self.queue.popleft())
        # SGLang spreads chunks over several transfer threads by room: per room the order
        # holds, across rooms it is whatever the threads make of it (here: the seed's)
        rank = {room: i for i, room in enumerate(self.rng.permutation(sorted({x[1] for x in ready})))}
        ready.sort(key=lambda x: rank[x[1]])
        for _, room, c in ready:
            r = self.reqs[room]
            r.queued -= 1
            if r.aborted or r.failed:
                continue
            parts = self._chunk_pages(r, c)
            last = int(c == r.chunks - 1)
            with self._req(r):
                self._xfer(r, "kv", parts, f"{room}_kv_{c}_{last}_0")
                if last:
                    self._xfer(r, "state", parts, f"{room}_state_0_0")
                    self._xfer(r, "aux", parts, f"{room}_aux")
            if last and "free-on-received" in self.bugs and not r.failed:
                self.mail.send("sent", room)     # status: handed to NIXL (not: arrived)

    def _xfer(self, r: _Req, group: str, parts: dict, tag: str) -> None:
        if group == "kv":
            pools = [(p, self.pools[p].layers) for p in ("kv", "index_k")]
            src_idx, dst_idx = prepped_indices(pools, parts, r.src, r.dst, self.src_off, self.dst_off)
        else:
            src_idx, dst_idx = prepped_indices([(group, 1)], parts, r.src, r.dst, None, None)
        try:
            with self._nixl:
                h = self.agent.make_prepped_xfer("WRITE", self.src_dl[group], src_idx, self.dst_dl[group], dst_idx,
                                                 tag.encode())
                st = self.agent.transfer(h)
        except Exception:   # NIXL refuses the request (e.g. an index past the prepped list)
            r.failed = True
            return
        if st == "ERR":
            r.failed = True
            with self._nixl:
                self.agent.release_xfer_handle(h)
            return
        self.posted += 1
        if "free-on-received" in self.bugs:
            self._worker().put(h)          # the transfer worker polls it; nobody here waits for it
        else:
            r.inflight.append(h)

    def _worker(self):
        """``free-on-received``: a transfer worker thread of its own polls every handle to
        DONE and releases it (SGLang's transfer worker). The scheduler (this thread) never
        waits for it: its frees follow decode's 'received', not any completion. NIXL calls
        of both threads take turns on a lock."""
        if self._jobs is None:
            import queue
            import threading
            self._jobs = queue.Queue()
            threading.Thread(target=self._poll_worker, name="xfer-worker", daemon=True).start()
        return self._jobs

    def _poll_worker(self) -> None:
        while True:
            h = self._jobs.get()
            deadline = time.monotonic() + 30.0
            while True:
                with self._nixl:
                    st = self.agent.check_xfer_state(h)
                if st != "PROC" or time.monotonic() > deadline:
                    break
                time.sleep(20e-6)
            with self._nixl:
                self.agent.release_xfer_handle(h)
            self._jobs.task_done()

    def _poll(self) -> None:
        for r in list(self.reqs.values()):
            with self._req(r):
                for h in r.inflight:
                    # poll to a terminal state: UCX completes (and sends the notification)
                    # from the initiator's progress, so leaving a handle PROC here would
                    # make what decode sees this step depend on timing
                    deadline = time.monotonic() + 30.0
                    while (st := self.agent.check_xfer_state(h)) == "PROC":
                        if time.monotonic() > deadline:
                            break
                        self.progress()
                    if st == "ERR":
                        r.failed = True
                    self.agent.release_xfer_handle(h)
            r.inflight = []
            if r.queued:
                continue
            if "free-on-received" in self.bugs:
                # the same bug on every path: nothing here waits for DONE (an aborted
                # request's pages go back at once); a finished one's went back on 'received'
                if r.aborted or r.failed or (r.next_chunk == r.chunks and r.acked):
                    self._finish(r)
                continue
            if r.aborted or r.failed or r.next_chunk == r.chunks:
                self._finish(r)

    def _finish(self, r: _Req) -> None:
        """All handles DONE (or the request is given up): free its pages, tell decode."""
        frees = []
        for pool, slots in r.src.items():
            done = r.freed.get(pool, ())
            left = [s for s in slots if s not in done]
            if left:
                self.alloc[pool].unref(left)
                r.freed.setdefault(pool, set()).update(left)
                frees.append((pool, left))
        if self.rec is not None:   # one call: the same rows as _free's rec.free per pool
            self.rec.frees(AGENT, r.key, frees, reason="abort" if r.aborted else "failed" if r.failed else "finish")
            kind = K.REQ_DONE if not (r.aborted or r.failed) else K.REQ_ABORT
            self.rec.event(kind, AGENT, r.key, detail=None if kind == K.REQ_DONE else
                           {"reason": "abort" if r.aborted else "failed"})
        if r.abort_at is not None:     # decode holds its pages until this ack
            self.mail.send("abort_ack", r.room)
        elif r.failed:
            self.mail.send("failed", r.room)
        del self.reqs[r.room]
        if r in self.waiting:
            self.waiting.remove(r)

    def idle(self) -> bool:
        """Nothing waiting, queued or in flight."""
        return not self.reqs and not self.queue and (self._jobs is None or not self._jobs.unfinished_tasks)
