"""Chunked sends: which pages each chunk carries and their prepped-list indices.

Pure functions (no NIXL, no memory), so the addressing -- where the uniform-slot-count
bug lives -- is testable on its own.
"""
from __future__ import annotations

import numpy as np


def chunk_positions(n: dict, start: dict, page_tokens: dict, chunk_pages: int, chunks: int, c: int) -> dict:
    """Positions (into a request's page lists from ``start``) of each pool's pages in chunk c.

    A chunk is ``chunk_pages`` kv pages; an index_k page goes with the chunk holding its
    first token (its own page size may differ from kv's); state and aux go with the last.
    """
    out = {"kv": list(range(c * chunk_pages, min(n["kv"], (c + 1) * chunk_pages)))}
    first_tok = (np.arange(n["index_k"]) + start["index_k"]) * page_tokens["index_k"]
    ck = np.clip((first_tok // page_tokens["kv"] - start["kv"]) // chunk_pages, 0, chunks - 1)
    out["index_k"] = [int(i) for i in np.nonzero(ck == c)[0]]
    if c == chunks - 1:
        out["state"], out["aux"] = [0], [0]
    return out


def prepped_indices(pools: list[tuple[str, int]], parts: dict, src: dict, dst: dict,
                    src_off: list[int] | None, dst_off: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination indices into prepped lists stacked region-major.

    ``pools``: (pool, layers) in list order; region r (a pool's layer) has slot s at
    index ``off[r] + s``. ``off`` None means a list of one region (state, aux).
    """
    src_idx, dst_idx = [], []
    r = 0
    for pool, layers in pools:
        pos = parts.get(pool, [])
        for _layer in range(layers):
            so = src_off[r] if src_off is not None else 0
            do = dst_off[r] if dst_off is not None else 0
            src_idx += [so + src[pool][i] for i in pos]
            dst_idx += [do + dst[pool][i] for i in pos]
            r += 1
    return np.asarray(src_idx, np.int32), np.asarray(dst_idx, np.int32)
