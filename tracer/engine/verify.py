"""The engine's own verifier: does every page a consumer reads hold the bytes its
producer wrote for that (request, pool, layer, page)? And if not, whose bytes are they?

Producers fill pages with provenance content (kernels/provenance.py), so the expected
bytes are a pure function of (writer request, pool, layer, page). Only the used part of
a partly filled last page is compared (its tail is whatever the slot held before).
"""
from __future__ import annotations

import collections
import dataclasses

import numpy as np

from ...kernels.provenance import decode, fill_pages, pool_tag, request_tag


def content(key: str, pool: str, layer: int, pages, item_len: int) -> np.ndarray:
    """The provenance bytes a producer writes for pages of (request, pool, layer)."""
    return fill_pages(request_tag(key), pool_tag(pool), layer, np.asarray(pages), item_len)


@dataclasses.dataclass
class Corruption:
    """One page that did not hold what its producer wrote."""
    request: str
    pool: str
    layer: int
    page: int
    slot: int
    holds: str                # whose bytes it holds, in words


class Verifier:
    """Counts pages read and corrupted pages, with attribution."""

    def __init__(self, keys=()):
        self._tags: dict[int, str] = {}
        self._pools: dict[int, str] = {}
        for k in keys:
            self.know_request(k)
        for p in ("kv", "index_k", "state", "aux"):
            self._pools[pool_tag(p)] = p
        self.pages_read = 0
        self.requests_read = 0
        self.corrupted: list[Corruption] = []
        self._bad_requests: set[str] = set()

    def know_request(self, key: str) -> None:
        self._tags[request_tag(key)] = key

    def check(self, key: str, pool: str, layer: int, slots, pages, writers, used, rows: np.ndarray) -> int:
        """Verify ``rows`` (n, item_len) read for pages ``pages`` of request ``key``.

        ``writers[i]`` is the request whose bytes page i should hold (the request itself,
        or the earlier turn that filled a shared prefix page); ``used[i]`` its used bytes.
        Returns the number of corrupted pages.
        """
        n, item_len = rows.shape
        self.pages_read += n
        expect = np.empty_like(rows)
        writers = list(writers)
        for w in set(writers):
            sel = np.asarray([x == w for x in writers])
            expect[sel] = content(w, pool, layer, np.asarray(pages)[sel], item_len)
        used = np.asarray(used)
        mask = np.arange(item_len)[None, :] < used[:, None]
        bad = np.nonzero(np.any((rows != expect) & mask, axis=1))[0]
        for i in bad:
            u = int(used[i])
            self.corrupted.append(Corruption(key, pool, layer, int(pages[i]), int(slots[i]),
                                             self._holds(rows[i, :u], writers[i], pool, layer, int(pages[i]))))
        if len(bad):
            self._bad_requests.add(key)
        return len(bad)

    def _holds(self, b: np.ndarray, writer: str, pool: str, layer: int, page: int) -> str:
        pv = decode(b)
        if pv.kind == "poison":
            return "poison (never written)"
        if pv.kind != "data":
            return "garbage"
        who = self._tags.get(pv.request_tag, f"tag {pv.request_tag:#x}")
        where = f"{self._pools.get(pv.pool_tag, '?')} layer {pv.layer} page {pv.page}"
        mixed = "" if pv.agree >= 0.999 else f" (mixed, {pv.agree:.0%})"
        if who == writer:
            return f"its own {where}{mixed}"
        return f"request {who}'s {where}{mixed}"

    def summary(self) -> dict:
        """Counts and attribution, JSON-friendly."""
        by_pool = collections.Counter(c.pool for c in self.corrupted)
        kinds = collections.Counter(_category(c.holds) for c in self.corrupted)
        return {"pages_read": self.pages_read, "requests_read": self.requests_read,
                "corrupted_pages": len(self.corrupted), "corrupted_requests": len(self._bad_requests),
                "corrupted_by_pool": dict(by_pool), "attribution": dict(kinds),
                "examples": [dataclasses.asdict(c) for c in self.corrupted[:8]]}


def _category(holds: str) -> str:
    if holds.startswith("poison"):
        return "never written (poison)"
    if holds.startswith("its own"):
        return "own bytes of another layer/page"
    if holds.startswith("request"):
        return "another request's bytes"
    return "garbage"
