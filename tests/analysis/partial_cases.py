"""Damage done to a copy of a trace, as data: what a real recording loses (a shard that
never arrived, a stream cut by a crash, control messages an engine sends over its own
sockets, transfers posted without a request). Each transform edits a trace folder in
place; tests apply them to copies under tmp_path, never to traces/."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc


def _read(path: str) -> pa.Table:
    with open(path, "rb") as f:   # into memory: the file is rewritten next
        return ipc.open_stream(pa.BufferReader(f.read())).read_all()


def _write(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as f, ipc.new_stream(f, table.schema) as w:
        for b in table.to_batches(max_chunksize=64):   # several batches, as a recorder writes
            w.write_batch(b)


def _unclose(trace: str, shard: str) -> None:
    p = os.path.join(trace, shard, "shard.json")
    with open(p) as f:
        info = json.load(f)
    info["closed"] = False
    with open(p, "w") as f:
        json.dump(info, f)


def drop_shard(shard: str):
    """The shard's folder never arrived (still listed in the manifest)."""
    def t(trace: str) -> None:
        shutil.rmtree(os.path.join(trace, shard))
    t.__name__ = f"drop_shard({shard})"
    return t


def cut_stream(shard: str, table: str, frac: float):
    """The process died while writing ``table``: the stream ends at ``frac`` of its bytes
    (mid-batch) and the shard was never closed."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, table + ".arrows")
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.truncate(int(size * frac))
        _unclose(trace, shard)
    t.__name__ = f"cut_stream({shard}/{table}@{frac})"
    return t


def drop_kinds(*kinds: str):
    """Events of these kinds were never recorded (e.g. msg_send/msg_recv: the engine sends
    its control messages over its own sockets); seqs stay contiguous, as a recorder
    that never saw them would number them."""
    def t(trace: str) -> None:
        for shard in _shards(trace):
            p = os.path.join(trace, shard, "events.arrows")
            ev = _read(p)
            keep = pc.invert(pc.is_in(ev.column("kind"), pa.array(list(kinds))))
            ev = ev.filter(keep)
            i = ev.schema.get_field_index("seq")
            ev = ev.set_column(i, ev.schema.field(i), pa.array(range(len(ev)), ev.schema.field(i).type))
            _write(p, ev)
    t.__name__ = f"drop_kinds({','.join(kinds)})"
    return t


def drop_kinds_on(shard: str, *kinds: str):
    """Events of these kinds were never recorded on one shard: e.g. its allocator runs in a
    process of its own (vLLM's scheduler under the multiprocess executor), so the shard has
    its layouts and transfers but no alloc/free of any request."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        ev = ev.filter(pc.invert(pc.is_in(ev.column("kind"), pa.array(list(kinds)))))
        i = ev.schema.get_field_index("seq")
        _write(p, ev.set_column(i, ev.schema.field(i), pa.array(range(len(ev)), ev.schema.field(i).type)))
    t.__name__ = f"drop_kinds_on({shard}:{','.join(kinds)})"
    return t


def null_request(*kinds: str):
    """Events of these kinds carry no request (an engine that posts without a request id
    in its notification tags, or whose tags kvtrace cannot parse)."""
    def t(trace: str) -> None:
        for shard in _shards(trace):
            p = os.path.join(trace, shard, "events.arrows")
            ev = _read(p)
            i = ev.schema.get_field_index("request")
            hit = pc.is_in(ev.column("kind"), pa.array(list(kinds)))
            col = pc.if_else(hit, pa.nulls(len(ev), ev.schema.field(i).type), ev.column("request"))
            _write(p, ev.set_column(i, ev.schema.field(i), col))
    t.__name__ = f"null_request({','.join(kinds)})"
    return t


def lose_events(shard: str, at: float, n: int):
    """The recorder lost ``n`` events in the middle of the shard (their seqs are missing;
    shard.json still counts every event it numbered)."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        i = int(len(ev) * at)
        _write(p, pa.concat_tables([ev.slice(0, i), ev.slice(i + n)]))
    t.__name__ = f"lose_events({shard}@{at}x{n})"
    return t


def _info(trace: str, shard: str, update) -> None:
    p = os.path.join(trace, shard, "shard.json")
    with open(p) as f:
        info = json.load(f)
    update(info)
    with open(p, "w") as f:
        json.dump(info, f)


def lose_descs(shard: str, at: float, posts: int, counted: bool = True):
    """A write of descriptor rows failed for good mid-run (the recorder counts them in
    shard.json's ``lost``, as it does): the rows of ``posts`` transfers from ``at`` of the
    stream on are missing while their posts and every later row are there. The shard
    stays closed. ``counted=False``: nothing says so (a stream damaged or edited after
    recording, still well-formed): only the posts' bytes show the rows are missing."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "descs.arrows")
        ds = _read(p)
        xs = sorted(set(ds.column("xfer").to_pylist()))
        gone = pa.array(xs[int(len(xs) * at): int(len(xs) * at) + posts], ds.schema.field("xfer").type)
        hit = pc.is_in(ds.column("xfer"), value_set=gone)
        _write(p, ds.filter(pc.invert(hit)))
        n = int(pc.sum(hit.cast(pa.int64())).as_py() or 0)
        if not counted:
            return
        _info(trace, shard, lambda i: i.setdefault("lost", {"rows": {}, "reasons": {}, "event_seqs": []})["rows"]
              .update({"descs": n}))
    t.__name__ = f"lose_descs({shard}@{at}x{posts}{'' if counted else ', silently'})"
    return t


def drop_rows(shard: str, table: str):
    """Every row of ``shard``'s ``table`` gone, the stream still well-formed and nothing
    counted lost (a damaged or edited file)."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, f"{table}.arrows")
        _write(p, _read(p).slice(0, 0))
    t.__name__ = f"drop_rows({shard}/{table})"
    return t


def shuffle_rows(shard: str, seed: int):
    """Every stream of ``shard`` stored in a random row order (a writer that flushes its
    threads' batches apart, or a file re-sorted by another tool): nothing is lost, and the
    analysis reads events in seq order, so it must find what the whole trace finds."""
    def t(trace: str) -> None:
        r = np.random.default_rng(seed)
        for table in ("events", "descs", "dlists", "layouts"):
            p = os.path.join(trace, shard, f"{table}.arrows")
            rows = _read(p)
            _write(p, rows.take(pa.array(r.permutation(len(rows)))))
    t.__name__ = f"shuffle_rows({shard})"
    return t


def repeat_desc_row(shard: str, at: float):
    """One descriptor row of ``shard`` stored twice in place (same transfer and position):
    read as a second descriptor it copies bytes the post never moved (on engine-clean: a
    false layer_offset_mismatch); only the post's bytes show it."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "descs.arrows")
        ds = _read(p)
        i = int(len(ds) * at)
        _write(p, pa.concat_tables([ds.slice(0, i + 1), ds.slice(i, 1), ds.slice(i + 1)]))
    t.__name__ = f"repeat_desc_row({shard}@{at})"
    return t


def drop_desc_row(shard: str, at: float):
    """One descriptor row of ``shard`` gone from inside its list (a position after it is
    still there), nothing counted lost: read as recorded, that slot layer was never sent."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "descs.arrows")
        ds = _read(p)
        xs, pos = ds.column("xfer").to_numpy(), ds.column("pos").to_numpy()
        last = {}
        for x, q in zip(xs.tolist(), pos.tolist()):
            last[x] = max(q, last.get(x, q))
        inner = [i for i in range(len(ds)) if pos[i] < last[int(xs[i])]]
        i = inner[int(len(inner) * at)]
        _write(p, pa.concat_tables([ds.slice(0, i), ds.slice(i + 1)]))
    t.__name__ = f"drop_desc_row({shard}@{at})"
    return t


def reuse_xfer_id(shard: str, at: float):
    """Two postings of ``shard`` under one transfer id (a writer that numbers transfers by a
    handle's address, freed and reused by the next handle): the later one's events and
    descriptor rows take the earlier one's id. Read as one transfer, one request's
    descriptors hold the other's slots."""
    def t(trace: str) -> None:
        pe, pd_ = os.path.join(trace, shard, "events.arrows"), os.path.join(trace, shard, "descs.arrows")
        ev, ds = _read(pe), _read(pd_)
        posts = [x for x, k in zip(ev.column("xfer").to_pylist(), ev.column("kind").to_pylist()) if k == "xfer_post"]
        i = int((len(posts) - 1) * at)
        a, b = posts[i], posts[i + 1]

        def remap(tab):
            j = tab.schema.get_field_index("xfer")
            col = tab.column(j)
            return tab.set_column(j, tab.schema.field(j), pc.if_else(pc.equal(col, b), pa.scalar(a, col.type), col))
        _write(pe, remap(ev))
        _write(pd_, remap(ds))
    t.__name__ = f"reuse_xfer_id({shard}@{at})"
    return t


def unsize_posts(shard: str):
    """``shard``'s posts carry no ``nbytes`` (a writer that does not record it: the format
    allows a null): a post's rows can then be judged only by their positions."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        i = ev.schema.get_field_index("nbytes")
        post = pc.fill_null(pc.equal(ev.column("kind"), "xfer_post"), False)
        nb = pc.if_else(post, pa.scalar(None, ev.schema.field(i).type), ev.column(i))
        _write(p, ev.set_column(i, ev.schema.field(i), nb))
    t.__name__ = f"unsize_posts({shard})"
    return t


def repeat_row(shard: str, kind: str, at: float):
    """One ``kind`` event of ``shard`` stored twice, seq and all (a writer that flushed a
    batch twice): which of the two came first, and where they stand, is unknown (read as
    two events, a repeated free is a double free)."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        hit = np.flatnonzero(np.asarray(pc.fill_null(pc.equal(ev.column("kind"), kind), False)))
        i = int(hit[int(len(hit) * at)])
        _write(p, pa.concat_tables([ev.slice(0, i + 1), ev.slice(i, 1), ev.slice(i + 1)]))
    t.__name__ = f"repeat_row({shard}/{kind}@{at})"
    return t


def untraced(shard: str, at: float, posts: int):
    """The process ran ``posts`` transfers its recorder saw but could not record (handles
    made before the tap): their post/done/release events and descriptor rows are not in the
    trace (seqs stay contiguous: the recorder never numbered them) while NIXL moved their
    bytes and delivered their notifications (the peer's receives are there), and shard.json's
    ``untraced_postings`` counts them, as the tap does."""
    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "descs.arrows")
        ds = _read(p)
        xs = sorted(set(ds.column("xfer").to_pylist()))
        gone = pa.array(xs[int(len(xs) * at): int(len(xs) * at) + posts], ds.schema.field("xfer").type)
        _write(p, ds.filter(pc.invert(pc.is_in(ds.column("xfer"), value_set=gone))))
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        hit = pc.and_(pc.is_in(ev.column("kind"), pa.array(list(XFER_KINDS))),
                      pc.is_in(ev.column("xfer"), value_set=gone.cast(ev.schema.field("xfer").type)))
        ev = ev.filter(pc.invert(pc.fill_null(hit, False)))
        i = ev.schema.get_field_index("seq")
        _write(p, ev.set_column(i, ev.schema.field(i), pa.array(range(len(ev)), ev.schema.field(i).type)))
        _info(trace, shard, lambda i: i.update(events=len(ev), untraced_postings={
            "transfer handle created before tracing started": len(gone)}))
    t.__name__ = f"untraced({shard}@{at}x{posts})"
    return t


def ring_window(frac: float, keep: str = "none", p: float = 0.5, seed: int = 0, complete: bool = False):
    """A flight-recorder dump's window (docs/ring.md): every shard starts at the first event
    at or after ``frac`` of the trace's time span (``ring.window.from_seq``), the shards end
    unclosed, and before the window each shard keeps ``keep``: ``none``, ``all``, ``owners``
    (what a ring keeps after it dropped its kept facts: nothing before a random point, then
    whole owners, a request or a transfer or a region, each with probability ``p``) or
    ``random`` (each event with probability ``p``: more than a ring would lose). The
    descriptors of posts left out go with them. ``complete``: shard.json's
    ``ring.window.state_complete``."""
    import random

    def t(trace: str) -> None:
        rng = random.Random(seed)
        shards = _shards(trace)
        times = sorted(x for sh in shards for x in _read(os.path.join(trace, sh, "events.arrows")).column("t_ns").to_pylist())
        from_t = times[min(len(times) - 1, int(len(times) * frac))]
        for sh in shards:
            ev = _read(os.path.join(trace, sh, "events.arrows"))
            ts, seqs = ev.column("t_ns").to_pylist(), ev.column("seq").to_pylist()
            start = next((i for i, x in enumerate(ts) if x >= from_t), len(ts))
            kept = [True] * len(ts)
            if keep != "all":
                cols = [ev.column(c).to_pylist() for c in ("request", "xfer", "addr")]
                hard, owners = rng.randint(0, start), {}
                for i in range(start):
                    if keep == "random":
                        kept[i] = rng.random() < p
                    elif keep == "owners":
                        o = next(((k, c[i]) for k, c in enumerate(cols) if c[i] is not None), None)
                        kept[i] = i >= hard and owners.setdefault(o, rng.random() < p)
                    else:
                        kept[i] = False
            _write(os.path.join(trace, sh, "events.arrows"), ev.filter(pa.array(kept, pa.bool_())))
            posts = [x for k, x, ok in zip(ev.column("kind").to_pylist(), ev.column("xfer").to_pylist(), kept)
                     if ok and k == "xfer_post"]
            ds = _read(os.path.join(trace, sh, "descs.arrows"))
            _write(os.path.join(trace, sh, "descs.arrows"),
                   ds.filter(pc.is_in(ds.column("xfer"), value_set=pa.array(posts, ds.schema.field("xfer").type))))

            def ring(info, start=start, kept=kept, seqs=seqs, ev=ev):
                info.update(closed=False, events=sum(kept))
                info["ring"] = {"spec": "test", "window": {
                    "from_seq": seqs[start] if start < len(seqs) else None, "from_t_ns": from_t,
                    "to_t_ns": max(ev.column("t_ns").to_pylist() or [0]), "pinned_events": sum(kept[:start]),
                    "evicted_events": start - sum(kept[:start]), "state_complete": complete}}
            _info(trace, sh, ring)
    t.__name__ = f"ring_window({frac},{keep},{p},{seed},{'complete' if complete else 'state dropped'})"
    return t


def let_go_at_window_start(shard: str, seed: int | None = None):
    """After ``ring_window``: ``shard``'s ring let go, before the window, of the last request
    that ended there while the other shards kept it whole (each shard decides alone which
    requests finished before the window's cut; docs/ring.md). Every event of that request on
    ``shard``, and the descriptors of its posts, are dropped; shard.json still says
    ``state_complete``. ``seed``: a random one of those requests instead of the last, and
    nothing done where there is none (fuzzing)."""
    import random

    def t(trace: str) -> None:
        p = os.path.join(trace, shard, "events.arrows")
        ev = _read(p)
        with open(os.path.join(trace, shard, "shard.json")) as f:
            info = json.load(f)
        start = info["ring"]["window"]["from_seq"]
        others = set()
        for sh in _shards(trace):
            if sh != shard:
                others |= set(_read(os.path.join(trace, sh, "events.arrows")).column("request").to_pylist())
        reqs, seqs = ev.column("request").to_pylist(), ev.column("seq").to_pylist()
        last: dict = {}
        for r, s in zip(reqs, seqs):
            if r is not None:
                last[r] = s
        ended = [(s, r) for r, s in last.items() if s < start and r in others]
        if not ended and seed is not None:
            return
        if not ended:
            raise ValueError(f"no request of shard {shard} ends before its window and lives on elsewhere")
        gone = max(ended)[1] if seed is None else random.Random(seed).choice(sorted(ended))[1]
        keep = pc.invert(pc.fill_null(pc.equal(ev.column("request"), gone), False))
        posts = pc.filter(ev.column("xfer"), pc.and_(keep, pc.equal(ev.column("kind"), "xfer_post")))
        _write(p, ev.filter(keep))
        ds = _read(os.path.join(trace, shard, "descs.arrows"))
        _write(os.path.join(trace, shard, "descs.arrows"),
               ds.filter(pc.is_in(ds.column("xfer"), value_set=posts.cast(ds.schema.field("xfer").type))))
        _info(trace, shard, lambda i: i.update(events=i["events"] - (len(ev) - pc.sum(keep.cast(pa.int64())).as_py())))
    t.__name__ = f"let_go_at_window_start({shard}{'' if seed is None else f',{seed}'})"
    return t


def ring_info(window):
    """Every shard's shard.json ``ring.window`` replaced by ``window`` (untrusted input: a
    value of the wrong type, a string where a bool belongs, no window at all)."""
    def t(trace: str) -> None:
        for sh in _shards(trace):
            _info(trace, sh, lambda i: i.setdefault("ring", {}).update(window=window))
    t.__name__ = f"ring_info({window!r})"
    return t


def _shards(trace: str) -> list[str]:
    return sorted(d for d in os.listdir(trace) if os.path.isdir(os.path.join(trace, d)) and not d.startswith(("_", ".")))


def copy_trace(src: str, dst: str) -> str:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_*"))
    return dst


XFER_KINDS = ("xfer_post", "xfer_done", "xfer_error", "xfer_release")

#: damage → the transforms that do it (each applied to a copy of a trace)
DAMAGE = {
    "missing_decode": [drop_shard("decode")],
    "missing_prefill": [drop_shard("prefill")],
    "decode_events_half": [cut_stream("decode", "events", 0.5)],
    "decode_events_quarter": [cut_stream("decode", "events", 0.25)],
    "decode_events_late": [cut_stream("decode", "events", 0.9)],
    "prefill_events_half": [cut_stream("prefill", "events", 0.5)],
    "prefill_events_late": [cut_stream("prefill", "events", 0.9)],
    "prefill_descs_half": [cut_stream("prefill", "descs", 0.5)],
    "prefill_descs_early": [cut_stream("prefill", "descs", 0.1)],
    "decode_descs_zero": [cut_stream("decode", "descs", 0.0)],
    "decode_events_zero": [cut_stream("decode", "events", 0.0)],
    "prefill_events_zero": [cut_stream("prefill", "events", 0.0)],
    "prefill_dlists_half": [cut_stream("prefill", "dlists", 0.5)],
    "both_events_half": [cut_stream("prefill", "events", 0.5), cut_stream("decode", "events", 0.6)],
    "decode_events_lost_middle": [lose_events("decode", 0.4, 25)],
    "prefill_events_lost_middle": [lose_events("prefill", 0.3, 25)],
    "no_page_messages": [drop_kinds("msg_send", "msg_recv")],
    "no_request_on_transfers": [null_request(*XFER_KINDS)],
    "prefill_allocator_unhooked": [drop_kinds_on("prefill", "alloc", "free")],
    "decode_allocator_unhooked": [drop_kinds_on("decode", "alloc", "free")],
    "prefill_descs_lost_middle": [lose_descs("prefill", 0.4, 3)],
    # rows gone with nothing recorded to say so (a damaged or edited stream): the posts' bytes tell
    "prefill_descs_dropped_silently": [lose_descs("prefill", 0.4, 3, counted=False)],
    "prefill_descs_tail_dropped_silently": [lose_descs("prefill", 0.5, 10**6, counted=False)],
    # the prepared lists every descriptor indexes, gone the same way
    "prefill_dlists_dropped_silently": [drop_rows("prefill", "dlists")],
    "prefill_postings_untraced": [untraced("prefill", 0.4, 3)],
    # a row stored twice leaves the order unknown from there (rows merely out of seq order
    # lose nothing: test_partial_traces checks those against the whole trace)
    "prefill_free_stored_twice": [repeat_row("prefill", "free", 0.5)],
    "prefill_desc_stored_twice": [repeat_desc_row("prefill", 0.5)],
    "decode_alloc_stored_twice": [repeat_row("decode", "alloc", 0.6)],
    # ... and where the writer records no post sizes, only the rows' positions show it
    "prefill_unsized_desc_stored_twice": [unsize_posts("prefill"), repeat_desc_row("prefill", 0.5)],
    "prefill_unsized_desc_dropped": [unsize_posts("prefill"), drop_desc_row("prefill", 0.5)],
    # two postings under one transfer id: which rows and completions are whose is unknown
    "prefill_xfer_id_reused": [reuse_xfer_id("prefill", 0.5)],
    # flight-recorder windows whose kept state was dropped (state_complete false), and one
    # whose start kept everything (state_complete true: left as it is)
    "ring_window_bare": [ring_window(0.3)],
    "ring_window_late": [ring_window(0.6)],
    "ring_window_owners": [ring_window(0.4, "owners", 0.7, seed=3)],
    "ring_window_random": [ring_window(0.5, "random", 0.8, seed=5)],
    "ring_window_kept": [ring_window(0.5, "all", complete=True)],
    # windows that kept everything, but one shard let go of a request at the window's cut
    # that the other kept: a receive there has no send in the dump
    "ring_window_kept_prefill_let_go": [ring_window(0.5, "all", complete=True), let_go_at_window_start("prefill")],
    "ring_window_kept_decode_let_go": [ring_window(0.5, "all", complete=True), let_go_at_window_start("decode")],
    # ... and its twin that lost events inside prefill's window too: a receive whose send is
    # missing may then have been sent inside it, so the receiver is cut there as for a lost tail
    "ring_window_kept_prefill_let_go_lost_middle": [ring_window(0.5, "all", complete=True), let_go_at_window_start("prefill"),
                                                    lose_events("prefill", 0.8, 25)],
    # a window that says nothing trustworthy is cut after its last event: nothing is checked
    "ring_window_garbage": [ring_window(0.4, "owners", 0.5, seed=1), ring_info({"state_complete": "true", "from_seq": "7"})],
    "ring_window_missing": [ring_window(0.4), ring_info(None)],
}
