"""Conformance of a trace directory to trace format v1 (docs/format.md).

``validate(path)`` returns the problems (the trace breaks the contract) and the notes
(what the contract allows but a reader reports: a listed shard missing, a shard not
closed, a stream cut mid-batch). It checks the contract only -- names, types and
invariants -- never whether the recorded program was correct; that is ``kvtrace check``.

It reads the files itself, independently of the reader, so a reader that tolerated
something the contract forbids would not hide it. The column names and types come from
schema.py, the one place the format is defined in code.
"""
from __future__ import annotations

import collections

import dataclasses
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from .reader import corrupt_column, lost_rows
from .schema import (FORMAT_NAME, MANIFEST, REQUIRED_COLUMNS, SCHEMA_VERSION, SCHEMAS,
                     SHARD_INFO, SLOT_KINDS, EventKind, contract_nulls,
                     contract_unpaired)

_KINDS = frozenset(k.value for k in EventKind)
_SLOT_KINDS = frozenset(k.value for k in SLOT_KINDS)


@dataclasses.dataclass
class Validation:
    """What :func:`validate` found; each entry is one line naming where."""
    trace: str
    problems: list[str]
    notes: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def same_type(got: pa.DataType, want: pa.DataType) -> bool:
    """Dictionary-encoded and large variants count as the same logical type."""
    if pa.types.is_dictionary(got):
        got = got.value_type
    got = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(got, got)
    if pa.types.is_list(got) or pa.types.is_large_list(got):
        return pa.types.is_list(want) and same_type(got.value_type, want.value_type)
    return got == want


def _read(path: str, where: str, v: Validation) -> tuple[pa.Table | None, bool]:
    """The complete batches of one stream, and whether it was cut mid-batch."""
    try:
        reader = ipc.open_stream(pa.memory_map(path))
    except (OSError, pa.ArrowException) as e:
        v.problems.append(f"{where}: not an Arrow IPC stream ({str(e).strip().splitlines()[0]})")
        return None, False
    try:
        reader.schema.names
    except UnicodeDecodeError:
        v.problems.append(f"{where}: the stream's schema is corrupt (a column name is not UTF-8)")
        return None, False
    batches, cut = [], False
    while True:
        try:
            b = reader.read_next_batch()
            try:   # readable, but its buffers lie (a flipped offset): damage, not a cut
                b.validate(full=True)
            except pa.ArrowInvalid:
                v.problems.append(f"{where}: record batch {len(batches) + 1} is corrupt{corrupt_column(b)}")
                return None, False
            batches.append(b)
        except StopIteration:
            break
        except (OSError, pa.ArrowInvalid):
            v.notes.append(f"{where}: cut after {len(batches)} complete batches")
            cut = True
            break
        except pa.ArrowException as e:   # e.g. a dictionary id no message defined
            v.problems.append(f"{where}: record batch {len(batches) + 1} is corrupt ({str(e).strip().splitlines()[0]})")
            return None, False
    return pa.Table.from_batches(batches, schema=reader.schema), cut


def _manifest(trace: str, v: Validation) -> dict | None:
    man_path = os.path.join(trace, MANIFEST)
    if not os.path.isdir(trace):
        v.problems.append(f"{trace}: no such trace directory")
        return None
    if not os.path.isfile(man_path):
        v.problems.append(f"{trace}: no {MANIFEST}")
        return None
    try:
        with open(man_path) as f:
            man = json.load(f)
    except (OSError, ValueError) as e:
        v.problems.append(f"{man_path}: not JSON ({e})")
        return None
    if not isinstance(man, dict):
        v.problems.append(f"{man_path}: not a JSON object")
        return None
    if man.get("format") != FORMAT_NAME or man.get("version") != SCHEMA_VERSION:
        v.problems.append(f"{man_path}: format/version must be {FORMAT_NAME!r}/{SCHEMA_VERSION}, "
                          f"got {man.get('format')!r}/{man.get('version')!r}")
    return man


def _columns(name: str, t: pa.Table, where: str, v: Validation) -> None:
    for col in REQUIRED_COLUMNS[name]:
        want = SCHEMAS[name].field(col).type
        if col not in t.schema.names:
            v.problems.append(f"{where}: missing column {col}")
        elif not same_type(t.schema.field(col).type, want):
            v.problems.append(f"{where}.{col}: type {t.schema.field(col).type}, want {want}")
    for col, n in contract_nulls(name, t).items():
        if n:
            v.problems.append(f"{where}.{col}: {n} null value(s) in a column every row needs")
    for (a, b), n in contract_unpaired(name, t).items():
        if n:
            v.problems.append(f"{where}: {n} row(s) hold one of {a} and {b} without the other")


def _events(ev: pa.Table, where: str, v: Validation) -> set:
    """Event invariants; returns the transfers posted in this shard."""
    names = set(ev.schema.names)
    if not {"seq", "kind"} <= names:
        return set()
    seq = ev.column("seq").to_pylist()
    if any(b is None or a is None or b <= a for a, b in zip(seq, seq[1:])):
        v.problems.append(f"{where}: seq not strictly increasing")
    kinds = ev.column("kind").to_pylist()
    unknown = sorted({str(k) for k in kinds if k not in _KINDS})
    if unknown:
        v.problems.append(f"{where}: unknown event kinds {unknown}")
    if {"slots", "checksums"} <= names:
        pages = ev.column("pages").to_pylist() if "pages" in names else [None] * len(kinds)
        if any(k == "alloc" and not pg for k, pg in zip(kinds, pages)):
            v.notes.append(f"{where}: alloc events without pages")
        for k, sl, cs in zip(kinds, ev.column("slots").to_pylist(), ev.column("checksums").to_pylist()):
            if k in _SLOT_KINDS and not sl:
                v.problems.append(f"{where}: a {k} event without slots")
                break
            if k in ("write", "read") and cs is not None and len(cs) != len(sl or []):
                v.problems.append(f"{where}: {k} checksums not parallel to slots")
                break
    if "xfer" not in names:
        return set()
    posted = [x for k, x in zip(kinds, ev.column("xfer").to_pylist()) if k == EventKind.XFER_POST.value]
    twice = sorted({x for x, n in collections.Counter(posted).items() if n > 1 and x is not None})
    if twice:   # every posting gets a new id: two under one leave whose rows and completions unknown
        v.problems.append(f"{where}: {len(twice)} transfer id(s) posted more than once (every posting, a re-post "
                          f"included, needs its own id), e.g. xfer {twice[:5]}")
    return set(posted)


def _layouts(lay: pa.Table, where: str, v: Validation) -> None:
    cols = ["pool", "layer", "nbytes", "slot_bytes", "num_slots"]
    if not lay.num_rows or not set(cols) <= set(lay.schema.names):
        return
    for r in lay.select(cols).to_pylist():
        if None not in r.values() and r["nbytes"] < r["slot_bytes"] * r["num_slots"]:
            v.problems.append(f"{where}: {r['pool']}/{r['layer']} nbytes {r['nbytes']} < slot_bytes * num_slots")
            return


def validate(trace: str) -> Validation:
    """Check ``trace`` (a directory) against the format contract."""
    trace = str(trace)
    v = Validation(trace, [], [])
    man = _manifest(trace, v)
    if man is None:
        return v
    shards = sorted(d for d in os.listdir(trace)
                    if os.path.isdir(os.path.join(trace, d)) and not d.startswith(("_", ".")))
    if not shards:
        v.problems.append(f"{trace}: no shard directories")
    listed = man.get("shards")
    if not isinstance(listed, list):
        v.problems.append(f"{trace}/{MANIFEST}: 'shards' must list the shard names")
    else:
        v.notes.extend(f"{trace}: listed shard {n} is missing" for n in sorted(set(listed) - set(shards)))
    used, described = set(), set()   # (agent, pool) of slot events / of layouts, over every shard
    for shard in shards:
        info = {}
        try:
            with open(os.path.join(trace, shard, SHARD_INFO)) as f:
                info = json.load(f)
                if not info.get("closed"):
                    v.notes.append(f"{shard}: not closed")
                ring = info.get("ring")
                if isinstance(ring, dict):
                    w = ring.get("window")
                    if not isinstance(w, dict) or w.get("state_complete") is not True:
                        at = w.get("from_seq") if isinstance(w, dict) else None
                        at = f"seq {at}" if isinstance(at, int) and not isinstance(at, bool) else "its window"
                        v.notes.append(f"{shard}: a ring window whose kept state was dropped: facts before {at} "
                                       "are only those kept (docs/ring.md)")
        except (OSError, ValueError, AttributeError):
            v.problems.append(f"{shard}: missing or unreadable {SHARD_INFO}")
        tables, cut = {}, False
        for name in SCHEMAS:
            p = os.path.join(trace, shard, name + ".arrows")
            if not os.path.isfile(p):
                v.problems.append(f"{shard}: missing {name}.arrows")
                continue
            t, was_cut = _read(p, f"{shard}/{name}", v)
            cut |= was_cut
            if t is not None:
                tables[name] = t
                _columns(name, t, f"{shard}/{name}", v)
        posted = _events(tables["events"], f"{shard}/events", v) if "events" in tables else None
        if "layouts" in tables:
            _layouts(tables["layouts"], f"{shard}/layouts", v)
        used |= _pairs(tables.get("events"), kinds=_SLOT_KINDS)
        described |= _pairs(tables.get("layouts"))
        ds = tables.get("descs")
        if ds is not None and posted is not None and "xfer" in ds.schema.names:
            orphan = set(ds.column("xfer").to_pylist()) - posted
            if orphan and cut:
                v.notes.append(f"{shard}/descs: descriptors of unposted transfers in a cut shard")
            elif orphan:
                v.problems.append(f"{shard}/descs: descriptors of transfers never posted in this shard: "
                                  f"{sorted(orphan)[:5]}")
        # rows the recorder counted lost (shard.json lost.rows) are said there: a note
        holes = None
        if ds is not None and ds.num_rows and {"xfer", "pos"} <= set(ds.schema.names):
            holes = _positions(ds, f"{shard}/descs", v, cut or _counted_lost(info, "descs"))
        if ds is not None and "events" in tables:
            _post_bytes(tables["events"], ds, f"{shard}/descs", v, cut or _counted_lost(info, "descs"), holes)
    # the format asks a layout for every pool slot events use; without one no descriptor maps onto
    # those slots (a layouts file lost, a hook that leaves a pool out): the analysis copes (the
    # checks that need them say they could not compare), so a note, not a problem
    undescribed: dict[str, list[str]] = {}
    for agent, pool in sorted(used - described):
        undescribed.setdefault(agent, []).append(pool)
    for agent, pools in undescribed.items():
        v.notes.append(f"{trace}: agent {agent}'s slot events use pool(s) {', '.join(pools)} that no layout "
                       "describes: descriptors cannot be mapped onto those slots")
    return v


def _pairs(t: pa.Table | None, kinds=None) -> set[tuple[str, str]]:
    """The (agent, pool) pairs of a table's rows (of events of ``kinds`` when given)."""
    need = {"agent", "pool"} | ({"kind"} if kinds else set())
    if t is None or not need <= set(t.schema.names):
        return set()
    if all(pa.types.is_string(t.schema.field(c).type) for c in need):   # the usual case: grouped in Arrow
        if kinds:
            t = t.filter(pc.is_in(t.column("kind"), value_set=pa.array(sorted(kinds), pa.string())))
        g = t.select(["agent", "pool"]).drop_null().group_by(["agent", "pool"]).aggregate([])
        return set(zip(g.column("agent").to_pylist(), g.column("pool").to_pylist()))
    rows = zip(t.column("agent").to_pylist(), t.column("pool").to_pylist(),
               t.column("kind").to_pylist() if kinds else [None] * t.num_rows)
    return {(str(a), str(p)) for a, p, k in rows if a is not None and p is not None and (not kinds or k in kinds)}


def _counted_lost(info, table: str) -> bool:
    return lost_rows(info).get(table, 0) > 0


def _post_bytes(ev: pa.Table, ds: pa.Table, where: str, v: Validation, cut: bool, named=None) -> None:
    """A post's ``nbytes``, where recorded, is the sum of its descriptors' bytes (a re-posted
    handle's rows are written again per post, so a transfer id's sums compare): rows holding
    fewer bytes than their posts were lost, even where the positions left show no hole (the
    last rows of a list; ``named``: transfer ids already named for their positions). In a stream cut short the last posting's rows may end early, and rows
    the recorder counted lost are said in shard.json: a note there."""
    if not ({"kind", "xfer", "nbytes"} <= set(ev.schema.names) and {"xfer", "nbytes"} <= set(ds.schema.names)):
        return
    posts = ev.filter(pc.equal(ev.column("kind"), EventKind.XFER_POST.value)).select(["xfer", "nbytes"])
    unsized = posts.filter(pc.is_null(posts.column("nbytes"))).column("xfer")
    posts = posts.filter(pc.invert(pc.is_in(posts.column("xfer"), value_set=unsized.combine_chunks())))
    if named is not None and len(named):   # already named by their positions
        posts = posts.filter(pc.invert(pc.is_in(posts.column("xfer"), value_set=named.cast(posts.schema.field("xfer").type))))
    if not posts.num_rows:
        return
    want = posts.group_by("xfer").aggregate([("nbytes", "sum")]).rename_columns(["xfer", "posted"])
    have = ds.select(["xfer", "nbytes"]).group_by("xfer").aggregate([("nbytes", "sum")]).rename_columns(["xfer", "rows"])
    j = want.join(have, "xfer", join_type="left outer")
    short = pc.fill_null(pc.less(pc.fill_null(j.column("rows"), 0), j.column("posted")), False)
    n = int(pc.sum(short.cast(pa.int64())).as_py() or 0)
    if n:
        xs = sorted(int(x) for x in j.filter(short).column("xfer").to_pylist()[:1000])[:5]
        (v.notes if cut else v.problems).append(
            f"{where}: {n} transfer(s) whose descriptor rows hold fewer bytes than their posts moved "
            f"(rows missing from the stream), e.g. xfer {xs}")


def _positions(ds: pa.Table, where: str, v: Validation, cut: bool) -> pa.Array:
    """Each transfer's descriptors are positions 0..n-1 of its list, each once: a hole or a
    repeat means rows lost or duplicated in the middle of the stream, which no cut shows
    (in a stream cut short, the last posting's rows may end early: a note there). Returns
    the transfer ids it named."""
    g = ds.group_by("xfer").aggregate([("pos", "min"), ("pos", "max"), ("pos", "count"), ("pos", "count_distinct")])
    lo, hi = g.column("pos_min").to_numpy(zero_copy_only=False), g.column("pos_max").to_numpy(zero_copy_only=False)
    n, nd = g.column("pos_count").to_numpy(), g.column("pos_count_distinct").to_numpy()
    bad = (lo != 0) | (hi != n - 1) | (nd != n)
    if bad.any():
        xs = g.column("xfer").to_numpy()[bad]
        (v.notes if cut else v.problems).append(f"{where}: {int(bad.sum())} transfer(s) whose descriptor positions are not 0..n-1 "
                          f"(rows missing or repeated mid-stream), e.g. xfer {sorted(int(x) for x in xs)[:5]}")
        return pa.array(xs, g.schema.field("xfer").type)
    return pa.array([], g.schema.field("xfer").type)
