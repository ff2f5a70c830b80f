"""Write the events in timeline order without a global sort.

Each shard's events are already in program order in the trace index, and the
timeline order keeps every shard's order, so the output is a merge: each block of
output rows takes one run of consecutive rows from each shard, read front to back.
Memory stays at about a block per shard; ~3x faster than DuckDB sorting 10M wide rows
with a 1 GB cap (which spills).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_GROUP = 8192   # one timeline row group: a cold page read costs one of these
BLOCK = 8 * ROWS_PER_GROUP   # rows gathered and written at a time


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
    only what is not yet consumed (a batch or so)."""

    def __init__(self, batches):
        self._it = iter(batches)
        self._buf: list[pa.Table] = []
        self._start = 0      # file row of the buffer's first row
        self._end = 0        # one past its last

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


def write_in_order(src: str | list[str], out: str, perm: np.ndarray, pairs: dict, batches=None) -> None:
    """Write the rows of ``src`` (a Parquet file, or files read as one) in the order ``perm`` (file row numbers, timeline order first)
    to ``out`` with a leading dense ``ord`` and the receive pairing columns. ``perm``
    must keep each file's rows in file order (the timeline keeps each shard's).

    Args:
        pairs: ``rows`` (sorted file rows of receives) and, parallel to it, ``shard``
            (pyarrow string array), ``seq`` and ``xfer`` (nullable pyarrow int64 arrays).
        batches: optional, one per file: an iterable of Arrow tables holding that file's
            rows in order, read instead of decoding the Parquet file (the trace's own
            stream files, which hold the same rows: copying them costs ~4x less).

    Output goes BLOCK rows at a time: a block holds one run of consecutive rows of each
    file, sliced from that file's cursor, and takes its rows from them; the next block is
    gathered in a thread while this one is encoded (both mostly outside the GIL).
    """
    from .index import write_options

    paths = [src] if isinstance(src, str) else list(src)
    files = [pq.ParquetFile(f) for f in paths]
    base = files[0].schema_arrow.remove_metadata()
    offsets = np.cumsum([0] + [pf.metadata.num_rows for pf in files])
    if batches is None:
        batches = [(t for b in pf.iter_batches(batch_size=BLOCK, use_threads=False)
                    for t in [pa.Table.from_batches([b])]) for pf in files]
    cursors = [_Cursor(b) for b in batches]
    schema = pa.schema([pa.field("ord", pa.int64())] + list(base) +
                       [pa.field("pair_shard", pa.string()), pa.field("pair_seq", pa.int64()),
                        pa.field("pair_xfer", pa.int64())])
    recv = pairs["rows"]

    def block(a: int) -> pa.Table:
        rows = perm[a:a + BLOCK]
        srt = np.sort(rows)
        bound = np.searchsorted(srt, offsets)
        parts = []
        for f in range(len(files)):
            i, j = int(bound[f]), int(bound[f + 1])
            if i == j:
                continue
            lo, hi = int(srt[i] - offsets[f]), int(srt[j - 1] - offsets[f]) + 1
            if hi - lo != j - i:
                raise ValueError("write_in_order: the order does not keep each file's rows in file order")
            part = cursors[f].rows(lo, hi)
            parts.append(pa.Table.from_arrays(part.select(base.names).columns, schema=base))
        gathered = pa.concat_tables(parts).combine_chunks()
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

    # a row group's values encoded in one batch, not eight of the default 1,024: the
    # same bytes (a row group is one page of each column either way), ~5% less CPU
    with pq.ParquetWriter(out, schema, write_batch_size=ROWS_PER_GROUP, **write_options(schema)) as w, \
            ThreadPoolExecutor(1) as ex:
        nxt = ex.submit(block, 0) if len(perm) else None
        for a in range(0, len(perm), BLOCK):
            tbl = nxt.result()
            nxt = ex.submit(block, a + BLOCK) if a + BLOCK < len(perm) else None
            w.write_table(tbl, row_group_size=ROWS_PER_GROUP)
