"""Write the events in timeline order without a global sort.

Each shard's events are already in program order in the trace index, and the
timeline order keeps every shard's order, so the output is a merge: each chunk of
8,192 output rows reads the one or two row groups per shard it needs (cached) and
takes its rows. Memory stays at a few row groups; ~3x faster than DuckDB sorting 10M
wide rows with a 1 GB cap (which spills).
"""
from __future__ import annotations

import collections

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_GROUP = 8192   # one timeline row group: a cold page read costs one of these


def grouped(shard_of: np.ndarray, seq: np.ndarray) -> bool:
    """Whether rows come as one contiguous block per shard with seq increasing in each."""
    if len(seq) < 2:
        return True
    change = shard_of[1:] != shard_of[:-1]
    if int(change.sum()) + 1 != len(np.unique(shard_of)):
        return False
    return bool(np.all((seq[1:] > seq[:-1]) | change))


def write_in_order(src: str | list[str], out: str, perm: np.ndarray, pairs: dict) -> None:
    """Write the rows of ``src`` (a Parquet file, or files read as one) in the order ``perm`` (file row numbers, timeline order first)
    to ``out`` with a leading dense ``ord`` and the receive pairing columns.

    Args:
        pairs: ``rows`` (sorted file rows of receives) and, parallel to it, ``shard``
            (pyarrow string array), ``seq`` and ``xfer`` (nullable pyarrow int64 arrays).
    """
    files = [pq.ParquetFile(f) for f in ([src] if isinstance(src, str) else src)]
    # the row groups of every file, one after the other: file row numbers run across them
    rgs = [(pf, k) for pf in files for k in range(pf.metadata.num_row_groups)]
    starts = np.cumsum([0] + [pf.metadata.row_group(k).num_rows for pf, k in rgs])
    cache: collections.OrderedDict[int, pa.Table] = collections.OrderedDict()

    def group(k: int) -> pa.Table:
        if k not in cache:
            cache[k] = rgs[k][0].read_row_group(rgs[k][1])
            if len(cache) > 6:
                cache.popitem(last=False)
        cache.move_to_end(k)
        return cache[k]

    base = files[0].schema_arrow.remove_metadata()
    schema = pa.schema([pa.field("ord", pa.int64())] + list(base) +
                       [pa.field("pair_shard", pa.string()), pa.field("pair_seq", pa.int64()),
                        pa.field("pair_xfer", pa.int64())])
    recv = pairs["rows"]
    with pq.ParquetWriter(out, schema, compression="zstd") as w:
        for a in range(0, len(perm), ROWS_PER_GROUP):
            rows = perm[a:a + ROWS_PER_GROUP]
            gk = np.searchsorted(starts, rows, side="right") - 1
            groups = np.unique(gk)
            tables = [group(int(k)) for k in groups]
            lens = np.cumsum([0] + [t.num_rows for t in tables])
            local = rows - starts[gk] + lens[np.searchsorted(groups, gk)]
            chunk = pa.concat_tables(tables).take(pa.array(local))
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
            w.write_table(pa.Table.from_arrays(cols, schema=schema), row_group_size=ROWS_PER_GROUP)
