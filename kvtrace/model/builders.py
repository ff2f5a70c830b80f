"""The derived objects built in Python (registered beside the SQL ones, see registry.py):
the shard index, the vector clocks, when each shard learns a transfer ended, the
checksum of never-written memory, and the in-flight overlap sweep (inflight.py). Each creates one table of its name."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .hb import compute_clocks
from .derived import builder


def _create(model, name: str, table: pa.Table) -> None:
    model.con.from_arrow(table).create(name)


@builder("shards")
def build_shards(model) -> None:
    """shards: shard VARCHAR, sidx INTEGER — every shard's position (the clocks' index)."""
    _create(model, "shards", pa.table({"shard": pa.array(model.shards, pa.string()),
                                       "sidx": pa.array(range(len(model.shards)), pa.int32())}))


@builder("clocks", requires=("sync_pairs", "shards"))
def build_clocks(model) -> None:
    """clocks: shard VARCHAR, seq BIGINT, vc BIGINT[] — the vector clock after every
    cross-shard receive (see hb.py)."""
    model.clocks = compute_clocks(model.shards, model.ask("cross_pairs"))
    _create(model, "clocks", model.clocks.table())


@builder("xfer_seen_raw", requires=("xfer_obs", "clocks", "shards"))
def build_seen_raw(model) -> None:
    """xfer_seen_raw: xsidx INTEGER, xfer BIGINT, side_sidx INTEGER, first BIGINT, data
    BOOLEAN — per observation of a transfer's end and per shard, the first seq there that
    knows it (xfer_seen.sql folds these)."""
    if model.clocks is None:   # "clocks" was read back from the saved tables (persist.py)
        model.clocks = compute_clocks(model.shards, model.ask("cross_pairs"))
    obs = model.ask("xfer_observations")
    col = lambda c: obs.column(c).to_numpy(zero_copy_only=False)  # noqa: E731
    xs, xf = col("xsidx").astype(np.int32), col("xfer").astype(np.int64)
    os_, oq, data = col("obs_sidx").astype(np.int64), col("obs_seq").astype(np.int64), col("data").astype(bool)
    parts = []
    for k in range(len(model.shards)):
        first = model.clocks.first_knowing(os_, oq, k)
        ok = first >= 0
        parts.append(pa.table({"xsidx": xs[ok], "xfer": xf[ok], "side_sidx": np.full(ok.sum(), k, np.int32),
                               "first": first[ok], "data": data[ok]}))
    empty = pa.table({"xsidx": pa.array([], pa.int32()), "xfer": pa.array([], pa.int64()),
                      "side_sidx": pa.array([], pa.int32()), "first": pa.array([], pa.int64()),
                      "data": pa.array([], pa.bool_())})
    _create(model, "xfer_seen_raw", pa.concat_tables(parts) if parts else empty)


#: the largest slot whose never-written checksum is computed (it hashes that many bytes of
#: poison). KV pages are KBs to MBs; a layout claiming more (a damaged trace) gets no
#: poison row, so no read of it is ever called "never written": a finding missed, never made up
POISON_MAX_BYTES = 256 << 20


@builder("poison", requires=("lay",))
def build_poison(model) -> None:
    """poison: slot_bytes UBIGINT, checksum UBIGINT — kvh64 of never-written memory per
    slot size: a read that sees it got nothing."""
    from ..kernels.checksum import kvh64
    from ..kernels.provenance import poison

    sizes = [n for v in model.ask("slot_sizes").column("slot_bytes").to_pylist() if (n := int(v)) <= POISON_MAX_BYTES]
    _create(model, "poison", pa.table({"slot_bytes": pa.array(sizes, pa.uint64()),
                                       "checksum": pa.array([int(kvh64(poison(n)[0])) for n in sizes], pa.uint64())}))


@builder("shard_cut")
def build_shard_cut(model) -> None:
    """shard_cut: shard VARCHAR, cut BIGINT — the last analysed seq of each shard (null:
    the whole shard; -1: a listed shard that is missing; see cut.py), untraced BIGINT —
    postings its process ran that the trace lacks. A partial trace's cut is created when it is opened."""
    if model.cuts:
        return
    from .cut import shard_cut_table
    _create(model, "shard_cut", shard_cut_table(model.trace, {}, []))


# the sweep reads end_hold_ids' integers and names only its pairs (id_names, xfers' requests):
# naming the tables keeps them pinned (in memory, never moved to their files) while its queries read them
@builder("inflight_pairs", requires=("end_hold_ids", "id_names", "xfers", "xfer_seen"), background=True)
def build_inflight_pairs(model, ask) -> pa.Table:
    """inflight_pairs: overlapping descriptor ends of transfers in flight together (see
    inflight.py for the rule and the columns). Its numpy sweep (one core) runs beside the
    SQL objects built after it (the other core): 10M events, ~8 s of the derive."""
    from . import inflight
    # past the sweep's share of the cap its ranges' ends are read in one scan (spilled per
    # range under the model's spill folder), not one scan of end_hold_ids per range
    return inflight.build(ask, model.shards, inflight.chunk_rows(model.cap_bytes),
                          stream=lambda name: ask(name, batches=inflight.STREAM_ROWS), spill_dir=model.con_spill)


@builder("timeline", requires=("sync_pairs",), on_demand=True)
def build_timeline(model) -> None:
    """timeline: every events column plus ord BIGINT (dense position in the
    happens-before-consistent total order) and pair_shard, pair_seq, pair_xfer (a
    receive's paired send): a view over the file order.py writes beside the index."""
    from . import order
    from .sqltext import query_sql

    path = order.ensure(model)
    model.con.execute(query_sql("cache_parquet_metadata"))
    model.con.read_parquet(path).create_view("timeline")
