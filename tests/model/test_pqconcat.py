"""kvtrace/model/pqconcat.py: Parquet files written apart and joined are byte for byte the
file one writer writes (the timeline's parts, merge.write_in_order)."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kvtrace.model import pqconcat
from kvtrace.model.index import write_options


def _table(n: int) -> pa.Table:
    rng = np.random.default_rng(7)
    kinds = np.array(["post", "notif_recv", "msg_send", None], dtype=object)
    lists = [None if i % 5 == 0 else list(range(i % 4)) for i in range(n)]
    return pa.table({
        "ord": pa.array(np.arange(n, dtype=np.int64)),
        "shard": pa.array(["prefill" if i % 3 else "decode" for i in range(n)]),
        "kind": pa.array(kinds[rng.integers(0, 4, n)].tolist(), pa.string()),
        "request": pa.array([None if i % 7 == 0 else f"req-{i // 10}" for i in range(n)]),
        "slots": pa.array(lists, pa.list_(pa.int64())),
        "nbytes": pa.array([None if i % 2 else i * 4096 for i in range(n)], pa.uint64()),
        "t_ns": pa.array(rng.integers(-2**40, 2**62, n), pa.int64()),
    })


def _write(path, t: pa.Table, group: int) -> None:
    with pq.ParquetWriter(path, t.schema, write_batch_size=group, **write_options(t.schema)) as w:
        w.write_table(t, row_group_size=group)


@pytest.mark.parametrize("cuts", [[0, 40, 200], [0, 8, 16, 200], [0, 192, 200]])
def test_joined_parts_are_the_one_writers_bytes(tmp_path, cuts):
    t, group = _table(200), 8      # 25 row groups: a row group list past the short header's 14
    _write(tmp_path / "one.parquet", t, group)
    parts = [str(tmp_path / f"part{k}.parquet") for k in range(len(cuts) - 1)]
    for k, p in enumerate(parts):
        _write(p, t.slice(cuts[k], cuts[k + 1] - cuts[k]), group)
    pqconcat.concat(parts)
    assert (tmp_path / "part0.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()
    assert pq.read_table(parts[0]).equals(t)
    assert not any((tmp_path / f"part{k}.parquet").exists() for k in range(1, len(parts)))


def test_a_file_that_is_not_parquet_is_refused(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"not parquet at all")
    _write(tmp_path / "b.parquet", _table(16), 8)
    with pytest.raises(pqconcat.ParquetConcatError):
        pqconcat.concat([str(tmp_path / "b.parquet"), str(tmp_path / "a.parquet")])
