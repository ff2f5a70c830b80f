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


@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_rows_stored_out_of_seq_order_lose_nothing(chunks):
    """Missing and repeated seqs are judged from the set of seqs, whatever order the rows
    are stored in: a permutation of a contiguous run misses nothing (before, every step
    back and forward in row order counted as a gap: "N events missing" on a complete
    shard); a repeat or a hole is still said, with the same counts in any order."""
    r = np.random.default_rng(chunks)
    whole = np.arange(0, 500)
    holes = np.r_[0:100, 103:500]                     # 100, 101, 102 missing
    dup = np.r_[0:500, 250]                           # 250 twice
    for seq, missing, repeated in [(whole, None, None), (holes, "3 events missing", None),
                                   (dup, None, "1 event seqs stored more than once (first: seq 250)")]:
        for order in (seq, r.permutation(seq)):
            scan = SeqScan()
            for part in np.array_split(order, chunks):
                scan.feed(_events(part))
            notes = scan.notes("p")
            assert any(missing in n for n in notes) if missing else not any("missing" in n for n in notes), notes
            assert any(repeated in n for n in notes) if repeated else not any("more than once" in n for n in notes)
            if order is not seq and not repeated:
                assert any("out of seq order" in n and "analysed in seq order" in n for n in notes), notes


@pytest.mark.parametrize("seed", range(12))
def test_seq_scan_counts_equal_a_set_of_the_seqs(seed):
    """Missing, gaps and repeats as SeqScan counts them, in any row order and batching,
    equal those of a plain set of the seqs."""
    r = np.random.default_rng(100 + seed)
    seq = np.cumsum(r.choice([1, 1, 1, 1, 2, 4], size=300)) + int(r.integers(0, 50))
    seq = np.r_[seq, r.choice(seq, size=int(r.integers(0, 4)))]          # some stored twice
    if seed % 3:
        seq = r.permutation(seq) if seed % 3 == 1 else np.r_[np.sort(seq)[:150], r.permutation(np.sort(seq)[150:])]
    scan = SeqScan()
    for part in np.array_split(seq, int(r.integers(1, 9))):
        if len(part):
            scan.feed(_events(part))
    have = set(seq.tolist())
    holes = [s for s in range(min(have), max(have)) if s not in have]
    gaps = sum(1 for s in holes if s - 1 in have)
    repeats = sorted(s for s in have if (seq == s).sum() > 1)
    missing, n_gaps, dup, first_gap, first_dup = scan._set()
    assert (missing, n_gaps, dup) == (len(holes), gaps, len(seq) - len(have))
    assert first_dup == (repeats[0] if repeats else None)
    assert first_gap == ((holes[0] - 1, min(s for s in have if s > holes[0])) if holes else None)
    assert scan.first_repeated() == (repeats[0] if repeats else None)
