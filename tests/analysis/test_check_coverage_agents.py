"""A check never reads "holds" over transfers it could not examine because one agent lacks a hook.

Capabilities are global: "reads" is there when any agent records a read. Two PD pairs
(p0 → d0 request r0, p1 → d1 request r1, e.g. two tensor-parallel ranks): pair 0 records
every hook; pair 1 lacks one (``gap``). The checks that need that hook compare pair 0 and
leave pair 1 out: their state is "unknown" (not "holds") and a note says how many items
they left out. The clean twin (both pairs hooked) reads "holds" with no note, and a bug on
the hooked pair is still found ("violated").
"""
from __future__ import annotations

import pytest

from kvtrace.analysis.session import TraceSession
from kvtrace.analysis.verdict import verdict
from kvtrace.tracer.builder import Pool, TraceBuilder

from cases_helpers import finish

#: gap -> (checks that must leave pair 1 out, text each note carries, check the bug on pair 0 trips)
GAPS = {
    "read": ({"read_before_done": "compared 1 of 2 transfers into another agent",
              "slot_reuse_before_read": "compared 1 of 2 transfers into another agent",
              "read_undelivered": "compared 1 of 2 agents receiving transfers",
              "buffer_class_not_sent": "compared 1 of 2 requests sent from one agent to another"},
             "records no reads", "read_before_done"),
    # checksum_mismatch's own coverage (analysis/sql/coverage_checksum_mismatch.sql) leaves out
    # the reads of a source written without a checksum: those of pair 1 here
    "write": ({"post_before_write": "compared 1 of 2 transfers out of an agent",
               "checksum_mismatch": "compared 2 of 4 read slot layers with a checksum"},
              "records no writes", "post_before_write"),
    # neither agent of pair 1 allocates: nothing the model notes on its own (one agent alone is
    # noted as unknown by the model and makes every check unknown: tests/analysis/test_allocs_elsewhere.py)
    "alloc": ({"src_free_before_done": "compared 1 of 2 transfers", "write_after_free": "compared 1 of 2 transfers",
               "desc_not_owned": "compared 1 of 2 transfers", "layer_offset_mismatch": "compared 1 of 2 transfers",
               "read_before_done": "compared 1 of 2 transfers into another agent",
               "slot_reuse_before_read": "compared 1 of 2 transfers into another agent",
               "read_undelivered": "compared 1 of 2 agents receiving transfers",
               "buffer_class_not_sent": "compared 1 of 2 requests sent from one agent to another",
               "post_before_write": "compared 1 of 2 transfers out of an agent",
               # with no allocation, which generation of a slot a read sees is unknown: the
               # reads of pair 1 are not predicted, so not compared
               "checksum_mismatch": "compared 2 of 4 read slot layers with a checksum",
               # d1 without an allocator writes no page of its own here
               "owner_overwrites_delivered": "compared 1 of 2 transfers into another agent"},
              "records allocations", "src_free_before_done"),
    # d1's process is not traced at all: p1 records its side, d1 nothing (no regions, layouts, reads)
    "untraced": ({"desc_out_of_bounds": "compared 3 of 4 transfer ends",
                  "layout_mismatch": "compared 1 of 2 transfers between two agents",
                  # no layout of d1 maps where pair 1's bytes land: its pages cannot be compared
                  "layer_offset_mismatch": "compared 1 of 2 transfers",
                  "read_before_done": "compared 1 of 2 transfers into another agent",
                  "slot_reuse_before_read": "compared 1 of 2 transfers into another agent",
                  "read_undelivered": "compared 1 of 2 agents receiving transfers",
                  "buffer_class_not_sent": "compared 1 of 2 requests sent from one agent to another",
                  "owner_overwrites_delivered": "compared 1 of 2 transfers into another agent"},
                 "was not traced", "desc_out_of_bounds"),
}
WHY = {"read": "no reads at all", "write": "records no writes at all",
       "alloc": "allocation", "untraced": ""}


def _trace(path, gap: str | None, bug: bool = False) -> str:
    b = TraceBuilder(path)
    pairs = []
    for i in range(2):
        p, d = b.agent(f"p{i}"), b.agent(f"d{i}", shard=f"p{i}" if (i == 1 and gap == "untraced") else None)
        p.pool("kv", layers=2, slot_bytes=64, num_slots=8)
        if i == 1 and gap == "untraced":   # its layout as the engine has it, recorded nowhere
            d.pools["kv"] = Pool("kv", 2, 64, 8, 0x7000000, 16, "bf16")
        else:
            d.pool("kv", layers=2, slot_bytes=64, num_slots=8)
        pairs.append((p, d))
    for i, (p, d) in enumerate(pairs):
        req, hooked = f"r{i}", i == 0 or gap is None
        traced = hooked or gap != "untraced"
        alloc = hooked or gap != "alloc"
        if traced:
            d.req_start(req)
            if alloc:
                d.alloc(req, "kv", [4])
            d.msg_send(p, f"{req}/pages", request=req)
            p.msg_recv(d, f"{req}/pages", request=req)
        if alloc:
            p.alloc(req, "kv", [1])
        late_write = bug and i == 0 and gap == "write"
        if (hooked or gap != "write") and not late_write:
            p.write(req, "kv", [1])
        if bug and i == 0 and gap == "untraced":   # the second layer's descriptor runs past d0's pool
            sp, dp = p.pools["kv"], d.pools["kv"]
            x = p.post(req, d, descs=[(sp.addr(0, 1), dp.addr(0, 4), 64), (sp.addr(1, 1), dp.addr(1, 8), 64)],
                       msg=f"{req}_kv".encode())
        else:
            x = p.post(req, d, src=("kv", [1]), dst=("kv", [4]), msg=f"{req}_kv".encode())
        if late_write:                                   # posted before the producer's write
            p.write(req, "kv", [1])
        if bug and i == 0 and gap == "alloc":            # source freed before any completion
            p.free(req, "kv", [1], reason="finish")
        early_read = bug and i == 0 and gap == "read"
        if early_read:                                   # read before the notification
            d.read(req, "kv", [4])
        if traced:
            d.notif_recv(p, f"{req}_kv".encode(), request=req)
            if (hooked or gap != "read") and not early_read:
                d.read(req, "kv", [4])
            if alloc:                                    # decode's next token into a page of its own
                d.alloc(req, "kv", [5])
                d.write(req, "kv", [5])
                d.free(req, "kv", [5], reason="finish")
        p.done(x, req)
        p.release(x, req)
        if alloc and not (bug and i == 0 and gap == "alloc"):
            p.free(req, "kv", [1], reason="finish")
        if traced:
            if alloc:
                d.free(req, "kv", [4], reason="finish")
            d.req_done(req)
    b.close()
    return path


def _run(path):
    with TraceSession(path) as s:
        found = s.findings()
        v = verdict(s, found, ["none"])
        return found, v, dict(s.checks_skipped), dict(s.checks_partial), list(s.notes)


def test_clean_twin_every_agent_hooked_holds(tmp_path):
    found, v, skipped, partial, notes = _run(_trace(str(tmp_path / "t.kvtrace"), None))
    assert found == [], [f.message for f in found]
    assert skipped == {} and partial == {}
    assert not [n for n in notes if " compared " in n], notes
    assert set(v.checks.values()) == {"holds"}, v.checks


@pytest.mark.parametrize("gap", list(GAPS))
def test_agent_without_hook_is_unknown_with_a_note(tmp_path, gap):
    found, v, skipped, partial, notes = _run(_trace(str(tmp_path / "t.kvtrace"), gap))
    assert found == [], [f.message for f in found]
    left, _, _ = GAPS[gap]
    assert skipped == {}
    assert set(partial) == set(left), partial
    for check, said in left.items():
        assert v.checks[check] == "unknown", (check, v.checks)
        assert said in partial[check], (check, partial[check])
        assert any(n.startswith(f"{check} compared") for n in notes), notes
    # every note names the missing hook (checksum_mismatch's and decode's own writes: their own reasons)
    assert not [c for c, why in partial.items() if WHY[gap] not in why
                and c not in ("checksum_mismatch", "owner_overwrites_delivered")], partial
    others = {c: st for c, st in v.checks.items() if c not in left}
    assert set(others.values()) == {"holds"}, others


@pytest.mark.parametrize("gap", list(GAPS))
def test_bug_on_the_hooked_agent_is_still_found(tmp_path, gap):
    found, v, _, partial, _ = _run(_trace(str(tmp_path / "t.kvtrace"), gap, bug=True))
    check = GAPS[gap][2]
    assert check in {f.check for f in found}, [f.message for f in found]
    assert v.checks[check] == "violated", v.checks
    assert check in partial                      # still says what it left out


def test_no_receiver_reads_skips_the_read_checks_with_why(tmp_path):
    """Reads recorded only on the sender (it reads its own pages): the receiver records none,
    so the read checks examine no transfer — skipped with why, never "holds"."""
    path = str(tmp_path / "t.kvtrace")
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for a in (p, d):
        a.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    d.req_start("r1")
    d.alloc("r1", "kv", [4])
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    p.alloc("r1", "kv", [1])
    p.write("r1", "kv", [1])
    p.read("r1", "kv", [1])
    x = p.post("r1", d, src=("kv", [1]), dst=("kv", [4]), msg=b"r1_kv")
    finish(p, d, "r1", x, [1], [4], read=False)    # decode never reads
    b.close()
    found, v, skipped, partial, _ = _run(path)
    assert found == [], [f.message for f in found]
    for check in ("read_before_done", "slot_reuse_before_read", "read_undelivered", "buffer_class_not_sent"):
        assert v.checks[check] == "skipped" and check not in v.checks_run, (check, v.checks)
        assert skipped[check].startswith("none of its 1 ") and "no reads at all" in skipped[check], skipped
    assert partial == {}
