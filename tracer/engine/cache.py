"""Decode-side prefix cache of multi-turn sessions.

After a turn finishes, the session keeps the full pages of its context (tokens up to a
multiple of every prefix pool's page size; the partly filled last page is sent again
next turn). The cache holds one counted reference to each kept slot, recorded as
``alloc``/``free`` of request ``cache-s{session}`` with ``shared: true``; the next turn
takes its own shared references. Idle sessions are evicted least recently used first.
"""
from __future__ import annotations

import dataclasses
import math

from .memory import PageAllocator

PREFIX_POOLS = ("kv", "index_k")


@dataclasses.dataclass
class Entry:
    """A session's cached prefix: slots and the request that wrote each page."""
    tokens: int = 0
    slots: dict = dataclasses.field(default_factory=lambda: {p: [] for p in PREFIX_POOLS})
    writers: dict = dataclasses.field(default_factory=lambda: {p: [] for p in PREFIX_POOLS})
    used: int = 0                        # step of last use (LRU)


class PrefixCache:
    """Per-session cached prefixes over the decode allocators."""

    def __init__(self, pools: dict, alloc: dict[str, PageAllocator], rec, agent: str):
        self.pools, self.alloc, self.rec, self.agent = pools, alloc, rec, agent
        self.align = math.lcm(*(pools[p].page_tokens for p in PREFIX_POOLS))
        self.entries: dict[int, Entry] = {}

    def get(self, sid: int) -> Entry:
        """The session's entry (an empty one if nothing is cached)."""
        return self.entries.get(sid) or Entry()

    def retain(self, sid: int, context: int, slots: dict, writers: dict, k: int) -> None:
        """After a turn over ``context`` tokens: keep its full pages (one reference each)."""
        c = self.entries.setdefault(sid, Entry())
        keep = (context // self.align) * self.align
        for p in PREFIX_POOLS:
            n = keep // self.pools[p].page_tokens
            add = slots[p][len(c.slots[p]):n]
            if add:
                self.alloc[p].ref(add)
                if self.rec is not None:
                    self.rec.alloc(self.agent, f"cache-s{sid}", p, add, list(range(len(c.slots[p]), n)), shared=True)
                c.slots[p] += add
                c.writers[p] += writers[p][len(c.writers[p]):n]
        c.tokens, c.used = keep, k

    def evict_lru(self, exclude: set[int]) -> bool:
        """Drop the least recently used entry not in ``exclude``; False when none is left."""
        idle = [(c.used, s) for s, c in self.entries.items() if s not in exclude]
        if not idle:
            return False
        self.drop(min(idle)[1], "evict")
        return True

    def drop(self, sid: int, reason: str) -> None:
        """Give the session's references back."""
        c = self.entries.pop(sid, None)
        if c is None:
            return
        for p in PREFIX_POOLS:
            if c.slots[p]:
                self.alloc[p].unref(c.slots[p])
                if self.rec is not None:
                    self.rec.free(self.agent, f"cache-s{sid}", p, c.slots[p], reason=reason)

    def close(self) -> None:
        for sid in list(self.entries):
            self.drop(sid, "shutdown")
