"""Sound on partial traces: a trace that lost a shard, a stream tail, its control messages
or its request ids never yields a false violation nor a false "ruled out".

Each committed example trace is copied and damaged (partial_cases.DAMAGE); then:
- every violation reported is one the undamaged trace also proves (its findings, with
  the consequences they fold in), so a clean trace stays clean;
- no hypothesis is "ruled out" unless the damaged trace is complete and fully ordered;
- a bug whose facts survive the damage is still found (EXPECT_FOUND).
"""
from __future__ import annotations

import os

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.cli import main

from partial_cases import DAMAGE, copy_trace

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "traces")
EXAMPLES = ("clean", "uniform-slot-count", "early-src-free", "abort-free-inflight", "notify-first-handle")

#: (example, damage) → the check that must still be found: the facts it needs survive
EXPECT_FOUND = {
    **{("uniform-slot-count", d): "layer_offset_mismatch" for d in (
        "decode_events_half", "decode_events_late", "prefill_events_half", "prefill_descs_half",
        "decode_descs_zero", "no_page_messages")},
    **{("early-src-free", d): "src_free_before_done" for d in (
        "decode_events_half", "decode_events_quarter", "decode_events_late", "prefill_events_half",
        "prefill_events_late", "prefill_descs_half", "decode_descs_zero", "both_events_half",
        "decode_events_lost_middle", "prefill_events_lost_middle", "no_page_messages")},
    # one side's allocator unhooked: the stray descriptors' match is unknown, but the
    # hooked side still proves they touch slots the request does not hold
    **{("uniform-slot-count", d): "desc_not_owned" for d in (
        "prefill_allocator_unhooked", "decode_allocator_unhooked")},
    **{("abort-free-inflight", d): "write_after_free" for d in (
        "decode_events_half", "decode_events_late", "prefill_events_late", "decode_descs_zero")},
    **{("notify-first-handle", d): "read_before_done" for d in (
        "decode_events_half", "decode_events_quarter", "decode_events_late", "prefill_events_half",
        "prefill_events_late", "prefill_descs_half", "decode_descs_zero", "both_events_half",
        "decode_events_lost_middle", "prefill_events_lost_middle")},
    # descriptor rows lost mid-stream (cut before the first incomplete post) or postings NIXL
    # ran unrecorded (nothing cut): what was recorded still proves the bug
    **{(ex, d): check for d in ("prefill_descs_lost_middle", "prefill_postings_untraced")
       for ex, check in (("uniform-slot-count", "layer_offset_mismatch"), ("early-src-free", "src_free_before_done"),
                         ("notify-first-handle", "read_before_done"))},
    ("abort-free-inflight", "prefill_postings_untraced"): "write_after_free",
    # a flight-recorder window whose kept state was dropped: the requests started inside it
    # are checked whole (before the fix the window also "found" double frees, descriptors into
    # slots not held, out-of-bounds ranges and checksum mismatches where the kept facts were
    # missing, and on real dumps the start gap read as a lost tail cut the whole window away)
    **{(ex, d): check for d in ("ring_window_bare", "ring_window_late", "ring_window_owners", "ring_window_random",
                                "ring_window_kept", "ring_window_kept_prefill_let_go", "ring_window_kept_decode_let_go")
       for ex, check in (("uniform-slot-count", "layer_offset_mismatch"), ("early-src-free", "src_free_before_done"),
                         ("abort-free-inflight", "write_after_free"), ("notify-first-handle", "read_before_done"))},
}


def proven(findings) -> set[tuple[str, str | None]]:
    """(check, request) of every violation, including the consequences folded into one."""
    out = set()
    for f in findings:
        out.add((f.check, f.request))
        for g in f.extra.get("folded") or []:
            out.add((g["check"], g["request"]))
    return out


_BASE: dict[str, set] = {}


def base(example: str) -> set:
    if example not in _BASE:
        with TraceSession(os.path.join(TRACES, f"engine-{example}.kvtrace")) as s:
            _BASE[example] = proven(s.findings())
    return _BASE[example]


def damaged(tmp_path, example: str, damage: str) -> str:
    path = copy_trace(os.path.join(TRACES, f"engine-{example}.kvtrace"), str(tmp_path / f"{example}-{damage}.kvtrace"))
    for t in DAMAGE[damage]:
        t(path)
    return path


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("example", EXAMPLES)
def test_damage_never_yields_a_false_verdict(tmp_path, example, damage):
    path = damaged(tmp_path, example, damage)
    with TraceSession(path) as s:
        found = s.findings()
        verdict = s.verdict(found)
        unknown = list(s.unknowns)
    extra = {p for p in proven(found) if p[1] is not None} - base(example)
    assert not extra, f"violations the undamaged trace does not have: {sorted(extra)[:5]}"
    # whatever the damage left unknown is said, with what to record
    assert unknown and all(u.record and u.count >= 0 for u in unknown)
    # three-valued per check: with facts missing, nothing "holds"
    assert "holds" not in verdict.checks.values(), verdict.checks
    for h in verdict.hypotheses:
        assert h.status != "ruled out", h
        if h.status == "supported":
            assert any(f.request is not None for f in found)
    want = EXPECT_FOUND.get((example, damage))
    if want:
        assert want in {f.check for f in found}, [f.check for f in found]


def test_missing_decode_of_the_uniform_slot_count_trace_rules_nothing_out(tmp_path, capsys):
    path = damaged(tmp_path, "uniform-slot-count", "missing_decode")
    rc = main(["check", path])
    out = capsys.readouterr().out
    assert rc == 0 and "ruled out" not in out and "proves nothing" in out
    assert "shard decode is listed in the manifest but missing" in out


def test_unordered_page_message_says_what_to_record(tmp_path, capsys):
    path = damaged(tmp_path, "clean", "no_page_messages")
    rc = main(["check", path])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "No findings." in out
    assert "record the destination-pages message" in out and "docs/hooks.md" in out
    assert "ruled out" not in out


@pytest.mark.parametrize("shard", ["prefill", "decode"])
def test_a_window_that_let_go_of_a_request_its_peer_kept_is_cut_at_its_start_not_at_the_receive(tmp_path, shard):
    """Each process of a dump decides alone which finished requests to keep at the window's
    cut: the receive of one request kept by one side only has no send in the dump. The
    sender is read as cut at its start (only requests reaching back there go unchecked); the
    receiver is not cut there, so the window's own findings stay."""
    path = damaged(tmp_path, "early-src-free", f"ring_window_kept_{shard}_let_go")
    with TraceSession(path) as s:
        found = s.findings()
        notes = [u.note() for u in s.unknowns]
        ends = {n: (c.cut, c.last_seq) for n, c in s.cuts.items()}
    assert "src_free_before_done" in {f.check for f in found}
    assert any(f"shard {shard}: its ring window let go of requests another shard's window still holds" in n
               for n in notes), notes
    assert not any("what was sent in" in n or "sent after its cut" in n for n in notes), notes
    # both windows are analysed to their last event, none cut at the receive
    assert all(cut == last for cut, last in ends.values()), ends
    # twin: the same window without the let-go request reads as it is, no start cut
    twin = damaged(tmp_path, "early-src-free", "ring_window_kept")
    with TraceSession(twin) as s:
        assert not any("let go" in u.note() for u in s.unknowns)


def test_complete_traces_are_untouched():
    """Nothing is cut or unknown in a complete trace, and its verdict can rule out."""
    with TraceSession(os.path.join(TRACES, "engine-clean.kvtrace")) as s:
        v = s.verdict()
        assert s.cuts == {} and s.unknowns == []
    assert [h.status for h in v.hypotheses].count("ruled out") >= 2
    assert set(v.checks.values()) <= {"holds", "skipped"} and "holds" in v.checks.values()


@pytest.mark.parametrize("damage", ["missing_decode", "decode_events_half", "prefill_descs_half", "decode_events_zero",
                                    "prefill_descs_lost_middle", "prefill_postings_untraced",
                                    "prefill_descs_dropped_silently", "prefill_dlists_dropped_silently"])
def test_info_says_complete_only_for_a_complete_trace(tmp_path, capsys, damage):
    import json

    assert main(["info", "--json", os.path.join(TRACES, "engine-clean.kvtrace")]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert whole["complete"] is True and whole["unknown"] == []
    path = damaged(tmp_path, "clean", damage)
    assert main(["info", "--json", path]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["complete"] is False
    assert info["unknown"] and all(u["what"] and u["record"] for u in info["unknown"])
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "incomplete" in out and "unknown:" in out


def _requestless(path: str, tags: bool) -> str:
    """Two posts with no request into the same decode bytes (with or without tags)."""
    from kvtrace.tracer.builder import TraceBuilder

    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
    sp, dp = p.pools["kv"], d.pools["kv"]
    x1 = p.post(None, d, descs=[(sp.addr(0, 1), dp.addr(0, 2), 64)], msg=b"a" if tags else None)
    x2 = p.post(None, d, descs=[(sp.addr(0, 3), dp.addr(0, 2), 64)], msg=b"b" if tags else None)
    if tags:
        d.notif_recv(p, b"a", request=None)
    p.done(x1, None)
    if tags:
        d.notif_recv(p, b"b", request=None)
    p.done(x2, None)
    for x in (x1, x2):
        p.release(x)
    b.close()
    return path


@pytest.mark.parametrize("tags", [True, False])
def test_unattributed_transfers_read_well_and_check_replay_and_exit_code_agree(tmp_path, capsys, tags):
    path = _requestless(str(tmp_path / "norq.kvtrace"), tags)
    with TraceSession(path) as s:
        found = s.findings()
        v = s.verdict(found)
    assert [f.check for f in found] == ["overlapping_inflight_writes"]
    f = found[0]
    assert f.severity == "warning" and f.extra["unattributed"] and "None" not in f.message
    assert "transfer 0 posted by prefill to decode" in f.message and "64 bytes" in f.message
    assert ("notification tag 'a'" if tags else "no notification tag") in f.message
    assert all(h.status != "supported" for h in v.hypotheses) and v.root_causes == []
    rc = main(["check", path])
    out = capsys.readouterr().out
    assert "None ·" not in out and "(no request)" in out
    replayed = main(["replay", path, "-o", str(tmp_path / "r.kvtrace")])
    rout = capsys.readouterr().out
    assert rc == 0 and replayed == 0 and "clean" in rout


def test_unattributed_findings_stay_apart_per_pool(tmp_path):
    """Two request-less posts race on decode's kv slot 2 and aux slot 5: one warning per
    pool (regroup merged them per (check, agent, tag) under the first one's pool, listing
    aux's slot 5 with kv's 2)."""
    from kvtrace.tracer.builder import TraceBuilder

    b = TraceBuilder(str(tmp_path / "norq2.kvtrace"))
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        side.pool("kv", layers=1, slot_bytes=64, num_slots=8)
        side.pool("aux", layers=1, slot_bytes=64, num_slots=8)
    kv, aux, dkv, daux = p.pools["kv"], p.pools["aux"], d.pools["kv"], d.pools["aux"]
    descs = [[(kv.addr(0, s), dkv.addr(0, 2), 64), (aux.addr(0, s), daux.addr(0, 5), 64)] for s in (1, 3)]
    xs = [p.post(None, d, descs=ds, msg=None) for ds in descs]
    for x in xs:
        p.done(x, None)
        p.release(x)
    b.close()
    with TraceSession(b.path) as s:
        found = s.findings()
    assert sorted((f.check, f.pool, f.slots) for f in found) == [
        ("overlapping_inflight_writes", "aux", [5]), ("overlapping_inflight_writes", "kv", [2])], \
        [(f.pool, f.slots, f.message) for f in found]
    assert all(f.extra["unattributed"] and f.severity == "warning" for f in found)


def test_descriptor_rows_dropped_with_nothing_counted_are_found_by_their_bytes(tmp_path):
    """A descriptor stream that lost rows with nothing recorded to say so (damaged or edited
    after recording) is cut at the first post whose rows fall short of its bytes, and the
    note says so: before, the missing rows read as "not sent" (false read_undelivered and
    buffer_class_not_sent). Its undamaged twin is complete, nothing cut."""
    path = damaged(tmp_path, "clean", "prefill_descs_dropped_silently")
    with TraceSession(path) as s:
        found = s.findings()
        notes = [u.note() for u in s.unknowns]
    assert found == [], [f.message for f in found][:3]
    assert any("are missing or repeated (they hold other bytes than the post moved, skip or repeat a position of its "
               "list, or index a prepared list not recorded; none were counted lost)" in n
               for n in notes), notes
    with TraceSession(copy_trace(os.path.join(TRACES, "engine-clean.kvtrace"), str(tmp_path / "twin.kvtrace"))) as s:
        s.findings()
        assert s.cuts == {} and s.unknowns == []


@pytest.mark.parametrize("damage", ["prefill_descs_dropped_silently", "prefill_dlists_dropped_silently",
                                    "prefill_xfer_id_reused"])
def test_watch_cuts_descriptor_rows_dropped_with_nothing_counted_as_check_does(tmp_path, damage):
    """`kvtrace watch` (a live session over the finished, damaged trace) cuts where `check`
    does and says why, instead of reading the missing rows as "not sent"; its undamaged twin
    stays whole in the live session too."""
    from kvtrace.analysis.live_session import LiveSession

    path = damaged(tmp_path, "clean", damage)
    with TraceSession(path) as s:
        batch = (sorted(f.message for f in s.findings()), {n: c.cut for n, c in s.cuts.items()},
                 sorted(u.note() for u in s.unknowns))
    live = LiveSession(path, threads=1)
    try:
        found = live.findings()
        assert (sorted(f.message for f in found), {n: c.cut for n, c in live.cuts.items()},
                sorted(u.note() for u in live.unknowns)) == batch
        assert found == [] and any("none were counted lost" in u.note() or "posted again later" in u.note()
                                   for u in live.unknowns), live.notes
    finally:
        live.close()
    twin = LiveSession(copy_trace(os.path.join(TRACES, "engine-clean.kvtrace"), str(tmp_path / "twin.kvtrace")),
                       threads=1)
    try:
        assert twin.findings() == [] and twin.cuts == {} and twin.unknowns == []
    finally:
        twin.close()


@pytest.mark.parametrize("example", EXAMPLES)
def test_rows_stored_out_of_seq_order_change_nothing(tmp_path, capsys, example):
    """Streams stored out of seq order hold every event: the findings and the verdict are
    the whole trace's and `info` calls it complete (before, each step back in row order
    counted as a gap: "N events missing", and the leak checks were skipped)."""
    import json

    from partial_cases import shuffle_rows

    with TraceSession(os.path.join(TRACES, f"engine-{example}.kvtrace")) as s:
        found = s.findings()
        whole = (sorted(f.message for f in found), s.verdict(found).checks)
    path = copy_trace(os.path.join(TRACES, f"engine-{example}.kvtrace"), str(tmp_path / "shuffled.kvtrace"))
    shuffle_rows("prefill", 1)(path)
    shuffle_rows("decode", 2)(path)
    with TraceSession(path) as s:
        found = s.findings()
        assert (sorted(f.message for f in found), s.verdict(found).checks) == whole
        assert s.cuts == {} and s.unknowns == [] and s.capabilities()["closed"]
        assert any("out of seq order" in n for n in s.notes) and not any("missing" in n for n in s.notes)
    assert main(["info", "--json", path]) == 0
    assert json.loads(capsys.readouterr().out)["complete"] is True


def test_a_seq_stored_twice_cuts_and_says_so(tmp_path, capsys):
    """A free stored twice read as a double free before; now the shard is cut before the
    repeated seq, the note says why, and `info` calls the trace incomplete."""
    import json

    path = damaged(tmp_path, "clean", "prefill_free_stored_twice")
    with TraceSession(path) as s:
        assert s.findings() == []
        assert any("is stored more than once, so the order of its events from there on is unknown" in u.note()
                   for u in s.unknowns), s.notes
    assert main(["info", "--json", path]) == 0
    assert json.loads(capsys.readouterr().out)["complete"] is False


def test_a_descriptor_row_stored_twice_is_not_a_second_descriptor(tmp_path):
    """A descriptor row repeated in place read as a second copy into the same slot: on
    engine-clean a false layer_offset_mismatch. Its post's bytes say a row is extra, so the
    shard is cut before that post, and the note says rows are missing or repeated."""
    path = damaged(tmp_path, "clean", "prefill_desc_stored_twice")
    with TraceSession(path) as s:
        assert s.findings() == []
        assert any("are missing or repeated" in u.note() for u in s.unknowns), s.notes


@pytest.mark.parametrize("damage", ["prefill_unsized_desc_stored_twice", "prefill_unsized_desc_dropped"])
def test_without_post_sizes_a_descriptor_row_missing_or_repeated_is_found_by_its_position(tmp_path, damage):
    """A writer that records no post nbytes: one row stored twice read as a second copy (a
    false layer_offset_mismatch on engine-clean), one row gone from inside its list as a
    slot layer never sent (a false read_undelivered). Their positions skip or repeat, so
    the shard is cut before that post. The twin without sizes but with every row keeps the
    whole trace's findings, uncut."""
    from partial_cases import unsize_posts

    twin = copy_trace(os.path.join(TRACES, "engine-clean.kvtrace"), str(tmp_path / "unsized.kvtrace"))
    unsize_posts("prefill")(twin)
    with TraceSession(twin) as s:
        assert s.findings() == [] and s.cuts == {} and s.unknowns == []
    path = damaged(tmp_path, "clean", damage)
    with TraceSession(path) as s:
        assert s.findings() == []
        assert any("skip or repeat a position of its list" in u.note() for u in s.unknowns), s.notes


def test_positions_numbered_from_one_where_posts_are_sized_cut_nothing(tmp_path):
    """A writer that numbers a list's positions from 1 breaks the format (validate says so),
    but where its posts carry nbytes the rows' bytes already show nothing is missing: the
    analysis does not cut on positions there, and finds what the whole trace finds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from partial_cases import _read, _write

    src = os.path.join(TRACES, "engine-early-src-free.kvtrace")
    with TraceSession(src) as s:
        whole = sorted(f.message for f in s.findings())
    path = copy_trace(src, str(tmp_path / "from-one.kvtrace"))
    p = os.path.join(path, "prefill", "descs.arrows")
    ds = _read(p)
    i = ds.schema.get_field_index("pos")
    _write(p, ds.set_column(i, ds.schema.field(i), pc.add(ds.column(i), pa.scalar(1, ds.schema.field(i).type))))
    with TraceSession(path) as s:
        assert sorted(f.message for f in s.findings()) == whole
        assert s.cuts == {} and s.unknowns == []


def test_two_postings_under_one_transfer_id_are_not_one_transfer(tmp_path, capsys):
    """A writer that reuses a transfer id (a handle's address, freed and reused): read as
    one transfer, two requests' descriptors were one request's — a false
    layer_offset_mismatch on engine-clean. The shard is cut before that id's first post,
    the note says why, and validate names the id. The whole trace (one id per posting)
    stays uncut."""
    path = damaged(tmp_path, "clean", "prefill_xfer_id_reused")
    with TraceSession(path) as s:
        assert s.findings() == []
        assert any("is posted again later, so which descriptors and completions belong to which posting is unknown"
                   in u.note() for u in s.unknowns), s.notes
    assert main(["validate", path]) == 2
    assert "transfer id(s) posted more than once" in capsys.readouterr().err
    with TraceSession(os.path.join(TRACES, "engine-clean.kvtrace")) as s:
        s.findings()
        assert s.cuts == {} and s.unknowns == []
