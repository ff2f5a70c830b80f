"""The trace index's first build scans each stream batch by batch instead of reading it
whole (read_stream(keep=False), SeqScan): the counts, truncation and notes must be those
of a full read, whatever the batch boundaries."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from kvtrace.tracer.reader import SeqScan, _seq_notes, read_stream
from kvtrace.tracer.schema import REQUIRED_COLUMNS, SCHEMAS


def _events(seq: np.ndarray) -> pa.Table:
    schema = SCHEMAS["events"]
    cols = {f.name: pa.nulls(len(seq), f.type) for f in schema}
    cols["seq"] = pa.array(seq, pa.int64())
    cols["kind"] = pa.array(["alloc"] * len(seq), pa.string())
    return pa.table([cols[f.name] for f in schema], schema=schema)


@pytest.mark.parametrize("seed", range(8))
def test_seq_scan_in_batches_equals_the_whole_column(seed):
    r = np.random.default_rng(seed)
    step = r.choice([1, 1, 1, 1, 2, 5, 0, -3], size=400)
    seq = np.cumsum(step) + 1000
    whole = _events(seq)
    cuts = np.sort(r.choice(np.arange(1, len(seq)), size=r.integers(0, 12), replace=False))
    scan = SeqScan()
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(seq)]):
        scan.feed(whole.slice(int(lo), int(hi - lo)))
    assert scan.notes("p") == _seq_notes("p", whole)
    assert _seq_notes("p", whole)          # the data do have gaps and steps back


@pytest.mark.parametrize("cut", [None, 0.6])
def test_scan_counts_equal_a_full_read(tmp_path, cut):
    path = str(tmp_path / "events.arrows")
    t = _events(np.arange(1, 3001))
    with pa.OSFile(path, "wb") as f, ipc.new_stream(f, t.schema) as w:
        for b in t.to_batches(max_chunksize=256):
            w.write_batch(b)
    if cut:
        with open(path, "r+b") as f:
            f.truncate(int(os.path.getsize(path) * cut))
    full = read_stream(path, SCHEMAS["events"], REQUIRED_COLUMNS["events"])
    seen = []
    scan = read_stream(path, SCHEMAS["events"], REQUIRED_COLUMNS["events"], keep=False,
                       on_batch=lambda b: seen.append(b.num_rows))
    assert scan.table.num_rows == 0 and sum(seen) == scan.num_rows == full.num_rows > 0
    assert (scan.batches, scan.truncated, scan.lost_bytes) == (full.batches, full.truncated, full.lost_bytes)
    assert scan.summary() == full.summary()
    assert full.truncated == bool(cut)
