"""TimelineSource paging, filters, jumps, follow predicates; the slot map and inspector facts."""
import os

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.tui.facts import Facts, XferState, desc_problem
from kvtrace.tui.filters import FilterError, parse_filter
from kvtrace.tui.follow import Follow, follow_predicate
from kvtrace.tui.source import TimelineSource


@pytest.fixture
def early(early_free_trace):
    return TimelineSource(TraceSession(early_free_trace))


def kinds(src):
    return [src.row(i)["kind"] for i in range(src.count)]


def test_filter_fields_and_free_text(early):
    assert early.set_filter(parse_filter("request=r2 kind=alloc,free")) == 2
    assert kinds(early) == ["alloc", "free"]
    assert early.set_filter(parse_filter("r1-pages")) == 2          # free text hits detail.id
    assert early.set_filter(parse_filter("")) == early.total


def test_slot_filter_keeps_the_transfers_that_touch_the_slot(early):
    n = early.set_filter(parse_filter("agent=prefill pool=kv slot=1"))
    ks = kinds(early)
    assert n == len(ks)
    assert {"alloc", "write", "free", "xfer_post", "xfer_done", "notif_recv"} <= set(ks)
    # the decode-side read of the delivered slot is another agent's slot: not in this history
    assert "read" not in ks


def test_bad_filters_say_why():
    with pytest.raises(FilterError, match="unknown field"):
        parse_filter("color=red")
    with pytest.raises(FilterError, match="number"):
        parse_filter("slot=x")


def test_jump_targets(early):
    assert early.row(early.resolve_jump("decode:0"))["shard"] == "decode"
    assert early.resolve_jump("5") == 5
    assert early.resolve_jump("@0s") == 0
    with pytest.raises(ValueError):
        early.resolve_jump("prefill:abc")


def test_next_event_of_the_followed_request_and_transfer(early):
    post = next(i for i in range(early.count) if early.row(i)["kind"] == "xfer_post")
    follow, label = follow_predicate(Follow.XFER, early.row(post))
    assert label == "transfer prefill#x0"
    nxt = early.find(follow, early.row(post)["ord"])
    assert early.row(early.position_of(nxt))["kind"] == "notif_recv"
    follow, _ = follow_predicate(Follow.REQUEST, early.row(post))
    prev = early.find(follow, early.row(post)["ord"], forward=False)
    assert early.row(early.position_of(prev))["request"] == "r1"


def test_slot_map_shows_the_overwrite_of_an_inflight_source(early, clean_trace):
    facts = Facts(early)
    rows = [early.row(i) for i in range(early.count)]
    r2_alloc = next(r for r in rows if r["kind"] == "alloc" and r["request"] == "r2")
    cells = facts.slot_map("prefill", "kv", r2_alloc["ord"], 8)
    assert cells[1].owners == ["r2"] and cells[1].xfer_out == [("prefill", 0, "r1")]
    assert "still moving out of a slot held by r2" in cells[1].hazard
    assert facts.transfer("prefill", 0, r2_alloc["ord"]).state is XferState.IN_FLIGHT
    # clean twin: at the same step of its story the source slot is still r1's, no hazard
    clean = TimelineSource(TraceSession(clean_trace))
    crow = next(clean.row(i) for i in range(clean.count) if clean.row(i)["kind"] == "xfer_post")
    cc = Facts(clean).slot_map("prefill", "kv", crow["ord"], 8)
    assert cc[1].owners == ["r1"] and cc[1].xfer_out and cc[1].hazard is None


def test_transfer_descriptors_resolve_to_pool_layer_slot(early):
    view = Facts(early).transfer("prefill", 0, early.total - 1)
    assert view.ndescs == 4 and view.mismatches == 0
    d = view.descs[0]
    assert (d["src_pool"], d["src_layer"], d["src_slot"], d["dst_slot"]) == ("kv", 0, 1, 5)
    assert [e["kind"] for e in view.events] == ["xfer_post", "notif_recv", "xfer_done", "xfer_release"]
    assert view.state is XferState.DONE


def _mismatched_descs(path) -> tuple[int, set]:
    src = TimelineSource(TraceSession(path))
    facts = Facts(src)
    why = []
    for shard, xfer in src.con.execute("SELECT shard, xfer FROM descs GROUP BY ALL").fetchall():
        why += [p for d in facts.transfer(shard, xfer, src.total - 1).descs if (p := desc_problem(d))]
    return len(why), set(why)


def test_inspector_flags_the_uniform_slot_count_descriptors(tmp_path):
    """The uniform-slot-count bug (uniform slot count applied to index_k) recorded by the reference
    engine: its descriptors land on slots the request does not hold; the clean twin's
    descriptors all check out."""
    import shutil
    root = os.path.join(os.path.dirname(__file__), "..", "..", "traces")
    for name in ("engine-uniform-slot-count", "engine-clean"):
        shutil.copytree(os.path.join(root, name + ".kvtrace"), tmp_path / name, ignore=shutil.ignore_patterns("_index"))
    n, why = _mismatched_descs(tmp_path / "engine-uniform-slot-count")
    assert n > 0 and why == {"source slot not held by the request"}
    assert _mismatched_descs(tmp_path / "engine-clean") == (0, set())


def test_background_open_steps_at_once_and_panels_wait_for_their_objects(early_free_trace):
    """`kvtrace tui` opens the timeline before the panels' derived objects exist: rows page at
    once, the slot filter and the inspector wait for the build and then give what a
    synchronous open gives; closing while the build runs stops it."""
    sync = TimelineSource(TraceSession(early_free_trace))
    bg = TimelineSource(TraceSession(early_free_trace), background=True)
    assert [bg.row(i) for i in range(bg.total)] == [sync.row(i) for i in range(sync.total)]
    flt = parse_filter("agent=prefill pool=kv slot=1")
    assert bg.set_filter(flt) == sync.set_filter(flt) > 0          # waits for descriptor ends
    assert bg.ready
    a, b = Facts(bg).transfer("prefill", 0, bg.total - 1), Facts(sync).transfer("prefill", 0, sync.total - 1)
    assert (a.descs, a.ndescs, a.state) == (b.descs, b.ndescs, b.state) and a.ndescs == 4
    bg.close()
    quit_early = TimelineSource(TraceSession(early_free_trace), background=True)
    quit_early.close()                                               # interrupted or finished: never hangs
    assert quit_early.ready


def test_background_derive_past_the_memory_share_while_the_viewer_writes(early_free_trace):
    """The panels' objects derive on the session's connection while another cursor holds
    a catalog write open (seen at 10M events under a 3 GB cap: the panels failed with
    "Cannot CHECKPOINT"): compressing the derived tables past the memory share (a
    CHECKPOINT) must wait for a later step, not fail the derive."""
    from kvtrace.analysis.session import TraceSession

    s = TraceSession(early_free_trace, keep_derived=False)
    s._compact_at = -1                       # every step is past the share
    viewer = s.cursor()
    viewer.execute("BEGIN")
    viewer.execute("CREATE TABLE held (x INTEGER)")
    s.derive(["xfer_span"])                  # raised TransactionException before
    viewer.execute("COMMIT")
    assert s.query("SELECT count(*) AS n FROM xfer_span").column("n")[0].as_py() > 0
