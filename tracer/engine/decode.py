"""The decode side: admits session turns, pre-allocates destination pages (reusing the
session's cached prefix pages), tells prefill where to write, counts notifications to
completion, reads and verifies every page, decodes, frees.

Completion needs ``{room}_aux``, ``{room}_state_0_0`` and every ``{room}_kv_{c}_*_0`` up
to the one with is_last=1. An abort or timeout while transferring sends prefill an
abort and keeps the pages until prefill's ``abort_ack`` says nothing of it is in flight
(SGLang's deferred release); the ``abort-free-inflight`` bug frees them at once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time


from ..schema import EventKind as K
from .inject import Injection
from . import nixlio
from .cache import PREFIX_POOLS, PrefixCache
from .geometry import pages_for, side_pools, used_tokens
from .memory import Memory, PageAllocator
from .verify import Verifier
from .workload import plan

AGENT = "decode"


@dataclasses.dataclass
class _Req:
    turn: object
    admitted: int
    slots: dict                          # pool -> slots, page order (shared prefix first)
    shared: dict                         # pool -> number of leading shared pages
    writers: dict                        # pool -> writer key per page
    state: str = "transferring"          # transferring | aborting | decoding
    got: set = dataclasses.field(default_factory=set)
    last_chunk: int | None = None
    finish_at: int = 0
    reason: str = ""                     # why it was aborted (abort | timeout)


class DecodeWorker:
    """One decode instance driving the workload's sessions."""

    def __init__(self, wl, bugs=(), rec=None, device: str = "cpu", listen_port: int | None = None,
                 checksums: bool = True):
        self.wl, self.rec = wl, rec
        self.bugs = Injection(bugs, wl.engine.get("inject_after", 0))
        self.checksums = checksums   # kvh64 on write/read events (off: null checksums, cheaper)
        self.pools = {p.name: p for p in side_pools(wl, "decode")}
        self.mem = Memory(self.pools.values(), device)
        self.alloc = {n: PageAllocator(p.num_slots) for n, p in self.pools.items()}
        self.agent = nixlio.make_agent(AGENT, rec, listen_port=listen_port)
        nixlio.register(self.agent, self.mem, rec)
        self.mail = nixlio.Mailbox(AGENT, "prefill", rec)
        self.sessions = plan(wl)
        self.total = sum(len(s) for s in self.sessions)
        self.verifier = Verifier(t.key for s in self.sessions for t in s)
        self.next_session = 0
        self.active: dict[int, list] = {}            # session -> remaining turns
        self.ready_at: dict[int, int] = {}           # session -> step its next turn arrives
        self.reqs: dict[int, _Req] = {}
        self.received = 0
        self.inbox: list[bytes] = []                 # delivered, not yet processed
        self.finished = 0
        self.stats = {"done": 0, "aborted": 0, "timed_out": 0, "failed": 0}
        self.cache = PrefixCache(self.pools, self.alloc, rec, AGENT)
        self.timeout = int(wl.engine["timeout_steps"])
        self._mismatch_seen = False                   # the first corrupted read triggers a ring dump

    def registration(self) -> None:
        """The one-time message telling prefill where decode's memory is."""
        self.mail.send("register", agent=AGENT, dst_num_slots=self.pools["kv"].num_slots,
                       kv=nixlio.describe(self.mem.kv_regions()), state=nixlio.describe(self.mem.regions["state"]),
                       aux=nixlio.describe(self.mem.regions["aux"]))

    def _req(self, key):
        return self.rec.request(key) if self.rec is not None else contextlib.nullcontext()

    # ------------------------------------------------------------------ phase A
    def begin_step(self, k: int) -> list[dict]:
        """Aborts, timeouts and admissions; returns the messages for prefill."""
        for room, r in list(self.reqs.items()):
            if r.state == "decoding" and r.turn.fate == "abort" and k >= r.admitted + r.turn.abort_after:
                # the KV is all here (observed): dropping the pages now is safe
                self.stats["aborted"] += 1
                self.rec and self.rec.event(K.REQ_ABORT, AGENT, r.turn.key, detail={"reason": "abort"})
                self._end_session(r.turn.session)
                self._release(r, "abort")
            if r.state != "transferring":
                continue
            if r.turn.fate == "abort" and k >= r.admitted + r.turn.abort_after:
                self._abort(r, "abort")
            elif k - r.admitted >= self.timeout:
                self._abort(r, "timeout")
        while len(self.active) < self.wl.concurrency and self.next_session < len(self.sessions):
            sid = self.next_session
            self.active[sid] = list(self.sessions[sid])
            self.ready_at[sid] = k
            self.next_session += 1
        for sid in list(self.active):
            turns = self.active[sid]
            if turns and self.ready_at.get(sid, k + 1) <= k and not self._admit(turns[0], k):
                break                                  # out of pages: admit in order
        return self.mail.take()

    def _admit(self, t, k: int) -> bool:
        c = self.cache.get(t.session)
        need = {p: pages_for(t.context, self.pools[p].page_tokens) - len(c.slots[p]) for p in PREFIX_POOLS}
        need.update(state=1, aux=1)
        if any(n > self.alloc[p].num_slots for p, n in need.items()):
            self._reject(t)                            # can never fit this decode instance
            return True
        while any(self.alloc[p].available < n for p, n in need.items()):
            busy = {r.turn.session for r in self.reqs.values()} | {t.session}
            if not self.cache.evict_lru(exclude=busy):
                return False
        self.active[t.session].pop(0)
        self.bugs.start()
        del self.ready_at[t.session]
        key = t.key
        slots, writers, shared = {}, {}, {}
        with self._req(key):
            if self.rec is not None:
                self.rec.event(K.REQ_START, AGENT, key, detail={"aliases": [f"s{t.session}t{t.turn}"],
                                                               "tokens": t.context, "cached": c.tokens})
            allocs = []
            for p, n in need.items():
                old = c.slots.get(p, [])
                if old:
                    self.alloc[p].ref(old)
                    allocs.append((p, old, range(len(old)), True))
                new = self.alloc[p].alloc(n)
                allocs.append((p, new, range(len(old), len(old) + n), False))
                slots[p], shared[p] = old + new, len(old)
                writers[p] = list(c.writers.get(p, [])) + [key] * n
            if self.rec is not None:   # one call: the same rows as rec.alloc per pool (shared, then new)
                self.rec.allocs(AGENT, key, allocs)
        r = _Req(t, k, slots, shared, writers)
        self.reqs[t.room] = r
        self.mail.send("pages", t.room, tokens=t.context, start={p: shared[p] for p in need},
                       dst={p: slots[p][shared[p]:] for p in need})
        c.used = k
        return True

    def _reject(self, t) -> None:
        self.active[t.session].pop(0)
        self.stats["failed"] += 1
        if self.rec is not None:
            self.rec.event(K.REQ_START, AGENT, t.key, detail={"aliases": [f"s{t.session}t{t.turn}"], "tokens": t.context})
            self.rec.event(K.REQ_ABORT, AGENT, t.key, detail={"reason": "too_long"})
        self._end_session(t.session)

    def _abort(self, r: _Req, reason: str) -> None:
        key = r.turn.key
        self.stats["timed_out" if reason == "timeout" else "aborted"] += 1
        self.rec and self.rec.event(K.REQ_ABORT, AGENT, key, detail={"reason": reason})
        self.mail.send("abort", r.turn.room, reason=reason)
        r.state, r.reason = "aborting", reason
        self._end_session(r.turn.session)            # the user went away
        if "abort-free-inflight" in self.bugs:       # bug: the WRITE may still be coming
            self._release(r, reason)

    # ------------------------------------------------------------------ phase B
    def end_step(self, k: int, msgs: list[dict], posted: int, wait_s: float = 30.0) -> None:
        """Take prefill's messages, wait for the notifications it posted, complete,
        read, decode and finish requests."""
        for m in msgs:
            self.mail.received(m)
            r = self.reqs.get(m["room"])
            if r is None:
                continue
            if m["type"] == "sent" and "free-on-received" in self.bugs:
                self.mail.send("received", m["room"])   # acknowledges the status, not the bytes
            elif m["type"] == "abort_ack" and r.state == "aborting":
                self._release(r, r.reason)
            elif m["type"] == "failed":
                if r.state == "transferring":
                    self.stats["failed"] += 1
                    self.rec and self.rec.event(K.REQ_ABORT, AGENT, r.turn.key, detail={"reason": "failed"})
                    self._end_session(r.turn.session)
                self._release(r, "failed")
        deadline = time.monotonic() + wait_s
        while self.received + len(self.inbox) < posted:
            self.pump()
            if time.monotonic() > deadline:
                raise RuntimeError(f"decode: {posted - self.received - len(self.inbox)} notifications never arrived")
        inbox, self.inbox = self.inbox, []
        for tag in inbox:
            self.received += 1
            self._notif(tag.decode(), k)
        for r in list(self.reqs.values()):
            if r.state == "decoding" and r.finish_at <= k:
                self._finish(r, k)

    def pump(self) -> None:
        """Progress the agent and keep what notifications it delivers for the next end_step."""
        for msgs in self.agent.get_new_notifs().values():
            self.inbox.extend(msgs)

    def _notif(self, tag: str, k: int) -> None:
        room, kind, *rest = tag.split("_")
        r = self.reqs.get(int(room))
        if r is None or r.state != "transferring":
            return                                   # late bytes of a request given up
        if kind == "kv":
            r.got.add(("kv", int(rest[0])))
            if rest[1] == "1":
                r.last_chunk = int(rest[0])
        else:
            r.got.add((kind, 0))
        complete = ("aux", 0) in r.got and ("state", 0) in r.got and r.last_chunk is not None and \
            all(("kv", c) in r.got for c in range(r.last_chunk + 1))
        if "notify-first-handle" in self.bugs and kind == "kv":
            complete = True                          # bug: the first chunk's notification is taken as all
        if complete:
            self._read(r)
            r.state, r.finish_at = "decoding", k + r.turn.output

    def _read(self, r: _Req) -> None:
        """The consumer uses every page of the request: record what it saw, verify it."""
        t, key = r.turn, r.turn.key
        self.verifier.requests_read += 1
        with self._req(key):
            for pool, slots in r.slots.items():
                p = self.pools[pool]
                if pool in PREFIX_POOLS:
                    pages = list(range(len(slots)))
                    used = [used_tokens(t.context, p.page_tokens, i) * p.token_bytes for i in pages]
                else:
                    pages, used = [0], [p.item_len]
                rows = [self.mem.region(pool, layer).read(slots) for layer in range(p.layers)]
                cs = None
                if self.rec is not None and self.checksums:
                    cs = self.mem.layer_checksums(pool, slots, rows).tolist()
                if self.rec is not None:   # one read per layer
                    self.rec.layers(K.READ, AGENT, key, pool, p.layers, slots, pages, cs)
                for layer in range(p.layers):
                    bad = self.verifier.check(key, pool, layer, slots, pages, r.writers[pool], used, rows[layer])
                    if bad and not self._mismatch_seen:   # the engine hook of a flight recorder
                        self._mismatch_seen = True
                        from ..ring import trigger
                        trigger(f"checksum mismatch: request {key} pool {pool} layer {layer} ({bad} pages)")

    def _finish(self, r: _Req, k: int) -> None:
        t = r.turn
        self.stats["done"] += 1
        self.cache.retain(t.session, t.context, r.slots, r.writers, k)
        self.rec and self.rec.event(K.REQ_DONE, AGENT, t.key)
        self._release(r, "finish")
        if self.active.get(t.session):
            self.ready_at[t.session] = k + 1 + t.think
        else:
            self._end_session(t.session)

    def _release(self, r: _Req, reason: str) -> None:
        """Drop the request's references to its pages (shared ones stay with the cache)."""
        for pool, slots in r.slots.items():
            self.alloc[pool].unref(slots)
        if self.rec is not None:   # one call: the same rows as rec.free per pool
            self.rec.frees(AGENT, r.turn.key, r.slots.items(), reason=reason)
        self.finished += 1
        del self.reqs[r.turn.room]      # later notifications and messages for it are ignored

    def _end_session(self, sid: int) -> None:
        self.active.pop(sid, None)
        self.ready_at.pop(sid, None)
        self.cache.drop(sid, "session_end")

    def done(self) -> bool:
        """Every planned request has finished or been given up, and no page is held."""
        return self.next_session >= len(self.sessions) and not self.active and not self.reqs

    def close(self) -> None:
        """Give back what the prefix cache still holds."""
        self.cache.close()
