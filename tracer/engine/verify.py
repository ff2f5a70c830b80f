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
    category: str = ""        # CATEGORIES: same request wrong layer/page, another request's, ...


#: what a corrupted page holds instead: the first two are the same request misaddressed
#: (a layout bug: deterministic, present at any load); the third is another request's
#: bytes (a lifetime or addressing bug that crosses requests: grows with concurrency).
SAME_WRONG_LAYER = "the same request's bytes of another layer or pool"
SAME_WRONG_PAGE = "the same request's bytes of another page"
OTHER_REQUEST = "another request's bytes"
NEVER_WRITTEN = "never written (poison)"
GARBAGE = "garbage"
CATEGORIES = (SAME_WRONG_LAYER, SAME_WRONG_PAGE, OTHER_REQUEST, NEVER_WRITTEN, GARBAGE)


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
            holds, cat = self._holds(rows[i, :u], writers[i], pool, layer, int(pages[i]))
            self.corrupted.append(Corruption(key, pool, layer, int(pages[i]), int(slots[i]), holds, cat))
        if len(bad):
            self._bad_requests.add(key)
        return len(bad)

    def _holds(self, b: np.ndarray, writer: str, pool: str, layer: int, page: int) -> tuple[str, str]:
        """Whose bytes a bad page holds, in words, and its category (CATEGORIES)."""
        pv = decode(b)
        if pv.kind == "poison":
            return "poison (never written)", NEVER_WRITTEN
        if pv.kind != "data":
            return "garbage", GARBAGE
        who = self._tags.get(pv.request_tag, f"tag {pv.request_tag:#x}")
        src_pool = self._pools.get(pv.pool_tag, "?")
        where = f"{src_pool} layer {pv.layer} page {pv.page}"
        mixed = "" if pv.agree >= 0.999 else f" (mixed, {pv.agree:.0%})"
        if who == writer:
            cat = SAME_WRONG_LAYER if (src_pool, pv.layer) != (pool, layer) else SAME_WRONG_PAGE
            return f"its own {where}{mixed}", cat
        return f"request {who}'s {where}{mixed}", OTHER_REQUEST

    def summary(self) -> dict:
        """Counts and attribution, JSON-friendly."""
        by_pool = collections.Counter(c.pool for c in self.corrupted)
        kinds = collections.Counter(c.category for c in self.corrupted)
        return {"pages_read": self.pages_read, "requests_read": self.requests_read,
                "corrupted_pages": len(self.corrupted), "corrupted_requests": len(self._bad_requests),
                "corrupted_by_pool": dict(by_pool), "attribution": dict(kinds),
                "other_request_pages": kinds.get(OTHER_REQUEST, 0),
                "examples": [dataclasses.asdict(c) for c in self.corrupted[:8]]}
