"""Where the next (previous) event of a request, a slot or a transfer is in the timeline,
without scanning it: one posting list per kind of key, written beside the timeline file
(order.py) once per trace, so the viewer's n/p is a lookup, not a query.

For each kind (KEYS) three files: ``follow_<kind>.keys.parquet``, the distinct keys
(request; agent, pool, slot; shard, xfer); ``follow_<kind>.ords.npy``, the ords of the
events naming each key, grouped by key and ascending within it; ``follow_<kind>.starts.npy``,
where key i's ords begin (i+1: end). A lookup finds the key's row in the keys table (a
vectorized compare), then binary-searches its ords in the memory-mapped file: a few
pages read, no SQL, so n/p stay fast while DuckDB derives the side panels' objects on
both cores.

Which events share a key is what tui/sql's old follow query said: a request: the events
whose ``request`` is it; a slot: the events of that agent and pool whose ``slots`` list
holds it; a transfer: the events with that (shard, xfer) and the receives paired with it
(pair_shard, pair_xfer). tests/tui/test_tui_follow.py checks lookups against that SQL.

``follow_stamp.json`` names the timeline stamp the lists were made from: a timeline
rebuilt (or lists made by older code, or none) means building them again (ensure). The
build (~2-3 s of CPU at 10M events) is not part of the timeline's: the viewer runs it in
the background and steps by SQL until it is done.

The build is numpy over the timeline file's columns (strings as the file's dictionary
codes): a stable radix sort by key on 16-bit digits (numpy sorts those in linear time),
or a lexsort when a key's values span too wide a range to pack.
"""
from __future__ import annotations

import collections
import json
import os
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

VERSION = 1
STAMP = "follow_stamp.json"
#: key columns of each kind
KEYS = {"request": ("request",), "slot": ("agent", "pool", "slot"), "xfer": ("shard", "xfer")}
_PARTS = ("keys.parquet", "ords.npy", "starts.npy")


def files(index_dir: str) -> list[str]:
    """Every file the posting lists of an index directory consist of."""
    return [_path(index_dir, k, part) for k in KEYS for part in _PARTS]


def _stamp(index_dir: str) -> dict | None:
    from . import order
    try:
        with open(os.path.join(index_dir, order.STAMP)) as f:
            return {"follow_version": VERSION, "timeline": json.load(f)}
    except (OSError, ValueError):
        return None


def is_current(index_dir: str) -> bool:
    """Whether the posting lists exist and were made from the current timeline file."""
    want = _stamp(index_dir)
    try:
        with open(os.path.join(index_dir, STAMP)) as f:
            got = json.load(f)
    except (OSError, ValueError):
        return False
    return want is not None and got == want and all(os.path.exists(p) for p in files(index_dir))


def ensure(timeline_path: str) -> None:
    """Build the posting lists of the timeline file (beside it) unless current."""
    d = os.path.dirname(timeline_path)
    if is_current(d):
        return
    want = _stamp(d)
    try:
        os.remove(os.path.join(d, STAMP))
    except FileNotFoundError:
        pass
    build(timeline_path, d)
    if want is not None:
        tmp = os.path.join(d, f"{STAMP}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "w") as f:
            json.dump(want, f)
        os.replace(tmp, os.path.join(d, STAMP))


def _path(index_dir: str, kind: str, part: str) -> str:
    return os.path.join(index_dir, f"follow_{kind}.{part}")


# -- build ------------------------------------------------------------------------
def build(timeline_path: str, index_dir: str) -> None:
    """Write the posting lists of the timeline file (rows in ord order, ord dense from
    0). Each kind reads its columns only, strings as codes (the file's row-group
    dictionaries unified into one numbering)."""
    pf = pq.ParquetFile(timeline_path, read_dictionary=["request", "agent", "pool", "shard", "pair_shard"])
    n = pf.metadata.num_rows
    rows_t = np.int32 if n < 2**31 else np.int64

    def read(cols):
        return pf.read(columns=cols, use_threads=True)

    # request
    code, req = _codes(read(["request"]).column(0))
    rows = np.flatnonzero(code >= 0).astype(rows_t)
    _write(index_dir, "request", n, rows, [code[rows]], [len(req)], lambda k: {"request": req.take(k[0])})
    del code, rows

    # transfer: own (shard, xfer) and the paired send's (pair_shard, pair_xfer)
    t = read(["shard", "xfer", "pair_shard", "pair_xfer"])
    sc, sd = _codes(t.column(0))
    pcd, pd = _codes(t.column(2))
    names = pa.concat_arrays([sd, pd]).unique()
    sc, pcd = _remap(sc, sd, names), _remap(pcd, pd, names)
    rs, ss, xs = [], [], []
    for s, x in ((sc, t.column(1)), (pcd, t.column(3))):
        x = x.combine_chunks()
        keep = np.flatnonzero((s >= 0) & x.is_valid().to_numpy(zero_copy_only=False))
        rs.append(keep.astype(rows_t))
        ss.append(s[keep])
        xs.append(x.fill_null(0).to_numpy(zero_copy_only=False)[keep])
    del t, sc, pcd
    rows = np.concatenate(rs)
    back = np.argsort(rows, kind="stable")      # ord order again (two sorted runs: a merge)
    rows, sk, xk = rows[back], np.concatenate(ss)[back], np.concatenate(xs)[back]
    del back, rs, ss, xs
    _write(index_dir, "xfer", n, rows, [sk, xk], [len(names), None],
           lambda k: {"shard": names.take(pa.array(k[0])), "xfer": pa.array(k[1], pa.int64())})
    del rows, sk, xk

    # slot: one entry per slot an event of an agent's pool names
    t = read(["agent", "pool", "slots"])
    ac, ad = _codes(t.column(0))
    plc, pld = _codes(t.column(1))
    npool = max(1, len(pld))
    ap = np.where((ac >= 0) & (plc >= 0), ac * npool + plc, -1)
    del ac, plc
    slots = t.column(2).combine_chunks()
    del t
    owner = pc.list_parent_indices(slots).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(slots)
    del slots
    ok = np.flatnonzero(flat.is_valid().to_numpy(zero_copy_only=False) & (ap[owner] >= 0))
    rows = owner[ok].astype(rows_t)
    del owner
    vals = flat.fill_null(0).to_numpy(zero_copy_only=False)[ok]
    del flat, ok
    apk = ap[rows]
    del ap
    _write(index_dir, "slot", n, rows, [apk, vals], [max(1, len(ad)) * npool, None],
           lambda k: {"agent": ad.take(pa.array(k[0] // npool)), "pool": pld.take(pa.array(k[0] % npool)),
                      "slot": pa.array(k[1], pa.int64())})


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """int32 codes of a string column (-1: null) into one dictionary."""
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    if col.num_chunks == 0:
        return np.array([], dtype=np.int32), pa.array([], pa.string())
    col = col.unify_dictionaries()
    out = np.empty(len(col), dtype=np.int32)
    at = 0
    for c in col.chunks:
        out[at:at + len(c)] = c.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        at += len(c)
    return out, col.chunk(0).dictionary.cast(pa.string())


def _remap(codes: np.ndarray, dic: pa.Array, names: pa.Array) -> np.ndarray:
    """Codes into ``dic`` as codes into ``names``."""
    if len(dic) == 0:
        return codes
    m = pc.index_in(dic, value_set=names).to_numpy(zero_copy_only=False).astype(np.int32)
    return np.where(codes >= 0, m[np.maximum(codes, 0)], -1).astype(np.int32)


def _order(parts: list[np.ndarray], sizes: list[int | None]) -> np.ndarray:
    """The stable order of rows by (parts[0], parts[1], ...): a radix sort on 16-bit
    digits when the key packs into 62 bits (``sizes``: a part's number of distinct codes,
    None for raw values, packed by their span), else a lexsort."""
    if not len(parts[0]):
        return np.array([], dtype=np.int64)
    packed = None
    bits = 0
    for v, size in zip(parts, sizes):
        lo = 0 if size is not None else int(v.min())
        span = size if size is not None else int(v.max()) - lo + 1
        width = int(span - 1).bit_length() if span > 1 else 0
        if bits + width > 62:
            return np.lexsort(tuple(reversed(parts)))
        if width:
            v = v - lo if lo else v
            packed = v if packed is None else (packed.astype(np.int64, copy=False) << width) | v
        bits += width
    if packed is None:
        return np.arange(len(parts[0]), dtype=np.int64)
    order = None
    for shift in range(0, bits, 16):
        digit = ((packed if order is None else packed[order]) >> shift & 0xFFFF).astype(np.uint16)
        o = np.argsort(digit, kind="stable")
        order = o if order is None else order[o]
    return order


def _write(index_dir: str, kind: str, n: int, rows: np.ndarray, parts: list[np.ndarray],
           sizes: list[int | None], keys_of) -> None:
    """Group ``rows`` (ords, ascending) by the key ``parts`` and write the three files."""
    order = _order(parts, sizes)
    ords = rows[order]
    srt = [p[order] for p in parts]
    del order
    change = np.zeros(len(ords), dtype=bool)
    if len(ords):
        change[0] = True
        for p in srt:
            change[1:] |= p[1:] != p[:-1]
    first = np.flatnonzero(change)
    starts = np.append(first, len(ords)).astype(np.int64)
    keys = pa.table(keys_of([p[first] for p in srt]))
    del srt, change
    for part, write in (("ords.npy", lambda f: np.save(f, ords)), ("starts.npy", lambda f: np.save(f, starts)),
                        ("keys.parquet", lambda f: pq.write_table(keys, f, compression="lz4"))):
        path = _path(index_dir, kind, part)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"   # two viewers may build at once
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)


# -- lookup -----------------------------------------------------------------------
class FollowIndex:
    """Lookups in the posting lists of one index directory. Thread-safe (a lock; each
    lookup is a compare over the distinct keys, cached, and a binary search)."""

    def __init__(self, index_dir: str):
        self._dir = index_dir
        self._kinds: dict[str, _Postings] = {}
        self._lock = threading.Lock()

    def find(self, kind: str, key: tuple, after: int, forward: bool = True,
             visible: np.ndarray | None = None) -> int | None:
        """The smallest ord > ``after`` (largest < ``after`` when not ``forward``) of an
        event naming ``key`` (values of KEYS[kind], in order); with ``visible`` (sorted
        ords) only those count. None when there is none."""
        with self._lock:
            return self._postings(kind).find(tuple(key), int(after), forward, visible)

    def warm(self) -> None:
        """Load every kind's distinct keys now (tens of ms at 10M events) rather than at
        the first n/p."""
        for kind in KEYS:
            with self._lock:
                self._postings(kind)

    def _postings(self, kind: str) -> "_Postings":
        p = self._kinds.get(kind)
        if p is None:
            p = self._kinds[kind] = _Postings(self._dir, kind)
        return p


class _Postings:
    CHUNK = 4096

    def __init__(self, index_dir: str, kind: str):
        self._keys = pq.read_table(_path(index_dir, kind, "keys.parquet"))
        self._names = KEYS[kind]
        self._ords = np.load(_path(index_dir, kind, "ords.npy"), mmap_mode="r")
        self._starts = np.load(_path(index_dir, kind, "starts.npy"), mmap_mode="r")
        self._seen: collections.OrderedDict[tuple, int] = collections.OrderedDict()

    def _index(self, key: tuple) -> int:
        got = self._seen.get(key)
        if got is None:
            mask = None
            for name, v in zip(self._names, key):
                col = self._keys.column(name)
                m = pc.equal(col, pa.scalar(v, col.type))
                mask = m if mask is None else pc.and_(mask, m)
            hit = np.flatnonzero(mask.to_numpy(zero_copy_only=False)) if mask is not None and len(mask) else []
            got = int(hit[0]) if len(hit) else -1
            self._seen[key] = got
            if len(self._seen) > 256:
                self._seen.popitem(last=False)
        return got

    def find(self, key: tuple, after: int, forward: bool, visible: np.ndarray | None) -> int | None:
        if any(v is None for v in key):
            return None
        i = self._index(key)
        if i < 0:
            return None
        seg = self._ords[int(self._starts[i]):int(self._starts[i + 1])]
        if forward:
            j = int(np.searchsorted(seg, after, side="right"))
            while j < len(seg):
                chunk = np.asarray(seg[j:j + self.CHUNK])
                hit = _visible(chunk, visible)
                if len(hit):
                    return int(hit[0])
                j += self.CHUNK
        else:
            j = int(np.searchsorted(seg, after, side="left"))
            while j > 0:
                chunk = np.asarray(seg[max(0, j - self.CHUNK):j])
                hit = _visible(chunk, visible)
                if len(hit):
                    return int(hit[-1])
                j -= self.CHUNK
        return None


def _visible(ords: np.ndarray, visible: np.ndarray | None) -> np.ndarray:
    if visible is None:
        return ords
    if not len(visible):
        return ords[:0]
    at = np.minimum(np.searchsorted(visible, ords), len(visible) - 1)
    return ords[visible[at] == ords]
