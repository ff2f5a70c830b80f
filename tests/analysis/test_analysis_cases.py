"""Every scenario of analysis_cases.py (cases_<family>.py): the checks find exactly the expected findings (bug) and
nothing on the clean twin and on the legal patterns."""
from __future__ import annotations

import pytest

from kvtrace.analysis.findings import CAPABILITIES
from kvtrace.analysis.session import TraceSession

from analysis_cases import CASES, XFAIL


def _key(f):
    return (f.check, f.agent, f.request, f.pool, sorted(f.slots))


def _sorted(keys):
    """Keys in a stable order; a finding with no pool (bytes no layout describes) has None there."""
    return sorted(keys, key=repr)


def run_case(tmp_path, name, bug):
    path = tmp_path / f"{name}-{int(bug)}.kvtrace"
    expected = CASES[name](str(path), bug=bug)
    with TraceSession(str(path)) as s:
        found = s.findings()
        skipped = s.checks_skipped
    return path, expected, found, skipped


BUGS = [n for n in CASES if not n.startswith("legal_")]
LEGAL = [n for n in CASES if n.startswith("legal_")]


def _params(names, bug):
    """Cases a check gets wrong today carry a strict xfail naming the check: once fixed,
    the xfail fails and must be removed."""
    return [pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[(n, bug)], strict=True))
            if (n, bug) in XFAIL else n for n in names]


@pytest.mark.parametrize("name", _params(BUGS, True))
def test_bug_is_found(tmp_path, name, validate_trace):
    path, expected, found, _ = run_case(tmp_path, name, True)
    validate_trace(path)
    got = _sorted(_key(f) for f in found)
    assert got == _sorted((c, a, r, p, sorted(s)) for c, a, r, p, s in expected), [f.message for f in found]
    for f in found:
        assert f.events and f.message and f.count >= 1


@pytest.mark.parametrize("name", _params(BUGS + LEGAL, False))
def test_clean_twin_and_legal_patterns_give_nothing(tmp_path, name):
    _, expected, found, skipped = run_case(tmp_path, name, False)
    assert expected == []
    assert found == [], [f.message for f in found]
    # no check skipped for want of layouts or allocator hooks (the scenarios record both)
    assert not any(why in (CAPABILITIES["layouts"], CAPABILITIES["slots"]) for _, why in skipped), skipped


def test_uniform_slot_count_names_the_stride(tmp_path):
    """The uniform-slot-count bug: the finding names kv's slot count applied to index_k."""
    _, _, found, _ = run_case(tmp_path, "uniform_slot_count", True)
    (f,) = found
    assert f.extra["stride"] == 8 and f.extra["stride_pool"] == "kv" and f.extra["pool_slots"] == 16
    assert "pool kv's slot count (M=8) applied to pool index_k (M=16)" in f.message
    assert f.extra["missing"] == 2
    folded = {g["check"] for g in f.extra["folded"]}
    assert {"desc_not_owned", "read_undelivered"} <= folded


def test_read_before_done_folds_the_stale_checksum(tmp_path):
    """Chunk 2 landed after the read: the read saw poison, folded into read_before_done."""
    _, _, found, _ = run_case(tmp_path, "notify_first_chunk", True)
    (f,) = found
    folded = f.extra.get("folded", [])
    assert folded and folded[0]["check"] == "checksum_mismatch"
    assert "arrived after the read" in folded[0]["message"]


def test_stale_bytes_of_an_overwritten_page_found_across_ranks(tmp_path):
    """The bug twin of legal_overwrite_from_another_rank: the read sees the first rank's
    bytes although the second rank's transfer (ordered after it, but with a smaller seq in
    its own process) is the latest into the page."""
    _, expected, found, _ = run_case(tmp_path, "legal_overwrite_from_another_rank", True)
    assert _sorted(_key(f) for f in found) == _sorted((c, a, r, p, sorted(s)) for c, a, r, p, s in expected), \
        [f.message for f in found]


def test_reuse_names_every_new_owner(tmp_path):
    """slot_reuse_before_read named one new owner (arg_min) for slots handed to several."""
    _, _, found, _ = run_case(tmp_path, "reuse_before_read_two_pools", True)
    (kv,) = [f for f in found if f.check == "slot_reuse_before_read" and f.pool == "kv"]
    assert "reallocated (handed to r2, r3)" in kv.message, kv.message


def test_waiting_names_every_rank(tmp_path):
    """request_waiting named one initiator (any_value) for transfers of two prefill ranks,
    and the first post's seq under whichever rank's shard it picked."""
    path, _, found, _ = run_case(tmp_path, "waiting_on_two_ranks_two_pools", True)
    assert {f.check for f in found} == {"request_waiting"}
    for f in found:
        assert f.extra["peers"] == ["prefill0", "prefill1"] and f.extra["peer"] == "prefill0", f.extra
        for i in (0, 1):
            assert f" from prefill{i}: prefill{i} posted them at prefill{i}:" in f.message, f.message


def test_overwrite_names_every_page_and_transfer(tmp_path):
    """owner_overwrites_delivered named one page and one transfer (arg_min on the write's
    seq, which every page of one write event shares) for a write over two received pages."""
    _, _, found, _ = run_case(tmp_path, "mtp_pad_overwrites_two_pages", True)
    (f,) = found
    assert "(slots 5,6, pages 0,1) over the bytes transfers x0,x1 delivered" in f.message, f.message


def test_uniform_slot_count_names_every_pool_of_the_stride(tmp_path):
    """Two pools of the list (kv, v) have the stride's slot count: both are named (fit's
    any_value named one), and the stride and its pool come from one candidate."""
    _, _, found, _ = run_case(tmp_path, "uniform_slot_count_shared_count", True)
    (f,) = found
    assert f.extra["stride"] == 8 and f.extra["stride_pool"] == "kv/v" and f.extra["pool_slots"] == 16
    assert "pool kv/v's slot count (M=8) applied to pool index_k (M=16)" in f.message, f.message


def test_read_before_done_names_a_post(tmp_path):
    """The first event of read_before_done is a post: shard and seq of one transfer."""
    path, _, found, _ = run_case(tmp_path, "replicas_read_early", True)
    (f,) = found
    with TraceSession(str(path)) as s:
        kinds = s.query("SELECT shard, seq, kind FROM events").to_pylist()
    kind = {(r["shard"], r["seq"]): r["kind"] for r in kinds}
    assert kind[f.events[0]] == "xfer_post", (f.events, kind)
