"""The descriptors a posting records reach the trace unchanged: the recorder's batched
descs conversion (_descs_batch, one concatenation per column) gives exactly the batch the
generic per-chunk conversion (_concat_arrays) gives for the same postings, for every mix of
prepped / unprepped postings, per-descriptor or shared devices and sizes, and agent names."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from kvtrace.tracer.recorder import _DESCS_CHUNK, _DESCS_WIRE, Recorder, _concat_arrays, _descs_batch


def _as_dicts(chunks):
    """The same postings as the dict chunks _concat_arrays takes (positions numbered, a
    shared value broadcast to every descriptor)."""
    out = []
    for c in chunks:
        d = dict(zip(_DESCS_CHUNK, c))
        n = c[-1]
        for k in ("nbytes", "src_device", "dst_device"):
            if d[k].ndim == 0:
                d[k] = np.broadcast_to(d[k], (n,))
        d["pos"] = np.arange(n, dtype=np.int32)
        d["_n"] = n
        out.append(d)
    return out


def _post(rec, rng, xfer):
    n = int(rng.integers(0, 9))
    addr = rng.integers(0, 1 << 40, n).astype(np.uint64)
    prepped = rng.random() < 0.5
    kw = {}
    if rng.random() < 0.5:
        kw["src_device"] = rng.integers(0, 4, n).astype(np.int32)
    else:
        kw["src_device"] = int(rng.integers(0, 4))
    kw["dst_device"] = rng.integers(0, 4, n).astype(np.int32) if rng.random() < 0.3 else 0
    if prepped:
        kw.update(src_dlist=int(rng.integers(0, 3)), src_idx=rng.integers(0, 50, n),
                  dst_dlist=int(rng.integers(3, 6)), dst_idx=list(rng.integers(0, 50, n)))
    nbytes = rng.integers(1, 1 << 20, n).astype(np.uint64) if rng.random() < 0.5 else int(rng.integers(1, 1 << 20))
    src, dst = [("prefill", "decode"), ("decode", "prefill"), (b"peer-x", "decode")][int(rng.integers(0, 3))]
    rec.descs_array(xfer, "WRITE" if rng.random() < 0.7 else "READ", src, dst, addr, addr + np.uint64(4096),
                    nbytes, **kw)


def test_batched_descs_equal_the_per_chunk_conversion(tmp_path):
    rng = np.random.default_rng(11)
    rec = Recorder(str(tmp_path / "t"), "s", flush_interval=3600, flush_rows=10 ** 9)
    try:
        for trial in range(40):
            rec._descs.clear()
            for x in range(int(rng.integers(1, 30))):
                _post(rec, rng, x)
            chunks = list(rec._descs)
            got = _descs_batch(chunks)
            want = _concat_arrays(_as_dicts(chunks), _DESCS_WIRE)
            assert got.schema == want.schema
            assert got.equals(want), trial
        # every kind of posting occurred: prepped and not (null dlist columns), shared and per-descriptor values
        assert got.num_rows > 0
    finally:
        rec._descs.clear()
        rec.close()


def test_all_unprepped_postings_give_null_index_columns(tmp_path):
    rec = Recorder(str(tmp_path / "t"), "s", flush_interval=3600, flush_rows=10 ** 9)
    try:
        rec.descs_array(0, "WRITE", "a", "b", np.array([1, 2], np.uint64), np.array([3, 4], np.uint64), 4096)
        rec.descs_array(1, "READ", "a", "b", np.array([5], np.uint64), np.array([6], np.uint64), 64, src_device=1)
        b = _descs_batch(list(rec._descs))
        assert b.column("src_idx").null_count == 3 and b.column("src_dlist").null_count == 3
        assert b.column("pos").to_pylist() == [0, 1, 0]
        assert b.column("nbytes").to_pylist() == [4096, 4096, 64]
        assert b.column("src_device").to_pylist() == [0, 0, 1]
        assert b.column("xfer").to_pylist() == [0, 0, 1]
        assert isinstance(b.column("op"), pa.DictionaryArray)
    finally:
        rec._descs.clear()
        rec.close()
