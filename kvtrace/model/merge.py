"""Write the events in timeline order without a global sort.

Each shard's events are already in program order in the trace index, and the
timeline order keeps every shard's order, so the output is a merge: each block of
output rows takes one run of consecutive rows from each shard, read front to back.
Memory stays at about a block per shard; ~3x faster than DuckDB sorting 10M wide rows
with a 1 GB cap (which spills).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_GROUP = 8192   # one timeline row group: a cold page read costs one of these
BLOCK = 8 * ROWS_PER_GROUP   # rows gathered and written at a time
#: runs of the timeline encoded at once (Parquet encoding is one thread per file; the
#: runs' files are joined after, see write_in_order)
PARTS = 2


def grouped(shard_of: np.ndarray, seq: np.ndarray) -> bool:
    """Whether rows come as one contiguous block per shard with seq increasing in each."""
    if len(seq) < 2:
        return True
    change = shard_of[1:] != shard_of[:-1]
    # as many runs as distinct shards (codes are small ints: a count, not a sort)
    if int(change.sum()) + 1 != int(np.count_nonzero(np.bincount(shard_of))):
        return False
    return bool(np.all((seq[1:] > seq[:-1]) | change))


class _Cursor:
    """Rows of one file read front to back: rows(lo, hi) with lo never going back keeps
    only what is not yet consumed (a batch or so). ``start``: the file row the batches
    begin at."""

    def __init__(self, batches, start: int = 0):
        self._it = iter(batches)
        self._buf: list[pa.Table] = []
        self._start = start  # file row of the buffer's first row
        self._end = start    # one past its last

    def rows(self, lo: int, hi: int) -> pa.Table:
        while self._end < hi:
            t = next(self._it)
            self._buf.append(t)
            self._end += t.num_rows
        while self._buf and self._start + self._buf[0].num_rows <= lo:   # consumed
            self._start += self._buf[0].num_rows
            self._buf.pop(0)
        buf = self._buf[0] if len(self._buf) == 1 else pa.concat_tables(self._buf)
        return buf.slice(lo - self._start, hi - lo)


def _parquet_from(pf: pq.ParquetFile, start: int):
    """The rows of a Parquet file from row ``start`` on, BLOCK rows a batch (the row
    groups before the one holding ``start`` not read)."""
    md = pf.metadata
    first, at = 0, 0
    while first < md.num_row_groups and at + md.row_group(first).num_rows <= start:
        at += md.row_group(first).num_rows
        first += 1
    if first == md.num_row_groups:
        return
    for b in pf.iter_batches(batch_size=BLOCK, row_groups=range(first, md.num_row_groups), use_threads=False):
        t = pa.Table.from_batches([b])
        if at < start:
            cut = min(start - at, t.num_rows)
            at += cut
            t = t.slice(cut)
        if t.num_rows:
            yield t


def write_in_order(src: str | list[str], out: str, perm: np.ndarray, pairs: dict, batches=None,
                   parts: int | None = None) -> None:
    """Write the rows of ``src`` (a Parquet file, or files read as one) in the order ``perm`` (file row numbers, timeline order first)
    to ``out`` with a leading dense ``ord`` and the receive pairing columns. ``perm``
    must keep each file's rows in file order (the timeline keeps each shard's).

    Args:
        pairs: ``rows`` (sorted file rows of receives) and, parallel to it, ``shard``
            (pyarrow string array), ``seq`` and ``xfer`` (nullable pyarrow int64 arrays).
        batches: optional, ``batches(file, start)``: an iterable of Arrow tables holding
            that file's rows in order from row ``start`` on, read instead of decoding the
            Parquet file (the trace's own stream files, which hold the same rows: copying
            them costs ~4x less).
        parts: how many runs of the output are encoded at once (threads; PARTS when
            None), each into its own Parquet file, then joined into one (pqconcat: the
            bytes one writer would write).

    Each part goes BLOCK rows at a time: a block holds one run of consecutive rows of
    each file, sliced from that file's cursor, and takes its rows from them; the next
    block is gathered in a thread while this one is encoded (both mostly outside the GIL).
    """
    from . import pqconcat
    from .index import write_options

    paths = [src] if isinstance(src, str) else list(src)
    files = [pq.ParquetFile(f) for f in paths]
    base = files[0].schema_arrow.remove_metadata()
    offsets = np.cumsum([0] + [pf.metadata.num_rows for pf in files])
    if batches is None:
        def batches(f: int, start: int):
            return _parquet_from(files[f], start)
    schema = pa.schema([pa.field("ord", pa.int64())] + list(base) +
                       [pa.field("pair_shard", pa.string()), pa.field("pair_seq", pa.int64()),
                        pa.field("pair_xfer", pa.int64())])
    recv = pairs["rows"]

    def block(a: int, cursors: list[_Cursor]) -> pa.Table:
        rows = perm[a:a + BLOCK]
        srt = np.sort(rows)
        bound = np.searchsorted(srt, offsets)
        got = []
        for f in range(len(files)):
            i, j = int(bound[f]), int(bound[f + 1])
            if i == j:
                continue
            lo, hi = int(srt[i] - offsets[f]), int(srt[j - 1] - offsets[f]) + 1
            if hi - lo != j - i:
                raise ValueError("write_in_order: the order does not keep each file's rows in file order")
            part = cursors[f].rows(lo, hi)
            got.append(pa.Table.from_arrays(part.select(base.names).columns, schema=base))
        gathered = pa.concat_tables(got).combine_chunks()
        chunk = gathered.take(pa.array(np.searchsorted(srt, rows)))
        at = np.searchsorted(recv, rows)
        hit = (at < len(recv)) & (recv[np.minimum(at, len(recv) - 1)] == rows) if len(recv) else np.zeros(len(rows), bool)
        idx = pa.array(np.where(hit, at, 0))
        mask = pa.array(~hit)

        def paired(col: pa.Array) -> pa.Array:
            if len(recv) == 0:
                return pa.nulls(len(rows), col.type)
            return pa.compute.if_else(mask, pa.scalar(None, col.type), col.take(idx))
        cols = [pa.array(np.arange(a, a + len(rows), dtype=np.int64))] + \
               [chunk.column(f.name).combine_chunks() for f in base] + \
               [paired(pairs["shard"]), paired(pairs["seq"]), paired(pairs["xfer"])]
        return pa.Table.from_arrays(cols, schema=schema)

    def write(a0: int, a1: int, path: str) -> None:
        """Output rows [a0, a1) (a0 a multiple of BLOCK) as a Parquet file of their own."""
        # each file's rows before a0 come first in perm: its rows in [a0, a1) start at their count
        starts = np.bincount(np.searchsorted(offsets, perm[:a0], side="right") - 1, minlength=len(files))
        cursors = [_Cursor(batches(f, int(starts[f])), int(starts[f])) for f in range(len(files))]
        # a row group's values encoded in one batch, not eight of the default 1,024: the
        # same bytes (a row group is one page of each column either way), ~5% less CPU
        with pq.ParquetWriter(path, schema, write_batch_size=ROWS_PER_GROUP, **write_options(schema)) as w, \
                ThreadPoolExecutor(1) as ex:
            nxt = ex.submit(block, a0, cursors) if a1 > a0 else None
            for a in range(a0, a1, BLOCK):
                tbl = nxt.result()
                nxt = ex.submit(block, a + BLOCK, cursors) if a + BLOCK < a1 else None
                w.write_table(tbl, row_group_size=ROWS_PER_GROUP)

    n = len(perm)
    nblocks = -(-n // BLOCK)
    k = max(1, min(PARTS if parts is None else parts, nblocks))
    cuts = [BLOCK * (nblocks * i // k) for i in range(k)] + [n]
    names = [out] + [f"{out}.part{i}" for i in range(1, k)]
    if k == 1:
        write(0, n, out)
        return
    try:
        with ThreadPoolExecutor(k) as ex:
            for f in [ex.submit(write, cuts[i], cuts[i + 1], names[i]) for i in range(k)]:
                f.result()
        pqconcat.concat(names)
    finally:
        for p in names[1:]:
            if os.path.exists(p):
                os.remove(p)
