"""Engine building blocks: workload presets and plans, pool geometry, page allocator."""
from __future__ import annotations

import pytest

from kvtrace.tracer.engine.geometry import index_k_token_bytes, side_pools
from kvtrace.tracer.engine.memory import PageAllocator
from kvtrace.tracer.engine.workload import WorkloadError, load, plan, preset_names


def test_presets_load_and_plans_are_deterministic():
    assert {"small", "production", "small-mixed"} <= set(preset_names())
    wl = load("small")
    assert plan(wl) == plan(load("small"))
    assert plan(wl) != plan(load("small", seed=wl.seed + 1))
    turns = [t for s in plan(wl) for t in s]
    assert len(turns) == wl.requests and len({t.room for t in turns}) == wl.requests
    # multi-turn sessions: a later turn's context extends the previous one's
    multi = [s for s in plan(wl) if len(s) > 1]
    assert multi and all(b.context > a.context for s in multi for a, b in zip(s, s[1:]))


def test_production_preset_shape():
    wl = load("production")
    turns = [t for s in plan(wl) for t in s]
    assert wl.concurrency == 64 and 200 <= len(turns) <= 500
    assert {t.fate for t in turns} == {"ok", "abort", "timeout"}
    assert max(t.context for t in turns) > 4 * min(t.context for t in turns)


def test_bad_workloads_are_one_line_errors(tmp_path):
    with pytest.raises(WorkloadError, match="no such file or preset"):
        load("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text("index_k = 'int4'\n")
    with pytest.raises(WorkloadError, match="index_k must be fp8 or bf16"):
        load(str(bad))
    bad.write_text("this is = = not toml")
    with pytest.raises(WorkloadError, match="not valid TOML"):
        load(str(bad))


def test_slot_counts_follow_the_token_budget():
    # same token budget and page size: kv and index_k have equal slot counts in either dtype
    for ik in ("fp8", "bf16"):
        pools = {p.name: p for p in side_pools(load("small", index_k=ik), "decode")}
        assert pools["kv"].num_slots == pools["index_k"].num_slots
    # index_k on its own page size: twice the slots
    pools = {p.name: p for p in side_pools(load("small-mixed"), "decode")}
    assert pools["index_k"].num_slots == 2 * pools["kv"].num_slots
    assert index_k_token_bytes("fp8", 128, 128) == 132 and index_k_token_bytes("bf16", 128, 128) == 256


def test_allocator_lowest_first_with_references():
    a = PageAllocator(8)
    assert a.alloc(3) == [0, 1, 2]
    a.ref([1])
    assert a.unref([0, 1, 2]) == [0, 2]        # slot 1 is still referenced
    assert a.alloc(2) == [0, 2]                # freed slots are handed out first
    assert a.alloc(10) is None


def test_region_offsets_correct_vs_uniform():
    from kvtrace.tracer.engine.nixlio import region_offsets
    # two kv layers of 8 slots, then two index_k layers of 16 slots (its own page size)
    group = {"lens": [8 * 100, 8 * 100, 16 * 10, 16 * 10], "item_lens": [100, 100, 10, 10]}
    assert region_offsets(group, uniform=False) == [0, 8, 16, 32]
    # SGLang's suspect: M = lens[0] // item_lens[0] = 8 for every region -> index_k layer 1
    # starts at 24, which is index_k layer 0's slot 8
    assert region_offsets(group, uniform=True) == [0, 8, 16, 24]
    same = {"lens": [800, 800, 80, 80], "item_lens": [100, 100, 10, 10]}
    assert region_offsets(same, uniform=True) == region_offsets(same, uniform=False)


def test_chunk_positions_with_index_k_on_its_own_page_size():
    from kvtrace.tracer.engine.chunks import chunk_positions, prepped_indices
    # 5 kv pages of 64 tokens from page 0, 10 index_k pages of 32 tokens; chunks of 2 kv pages
    n, start, pt = {"kv": 5, "index_k": 10}, {"kv": 0, "index_k": 0}, {"kv": 64, "index_k": 32}
    parts = [chunk_positions(n, start, pt, 2, 3, c) for c in range(3)]
    assert [p["kv"] for p in parts] == [[0, 1], [2, 3], [4]]
    assert [p["index_k"] for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert "state" in parts[2] and "state" not in parts[0]
    # cached prefix: sending starts at kv page 2 / index_k page 4 (same token)
    p0 = chunk_positions({"kv": 3, "index_k": 6}, {"kv": 2, "index_k": 4}, pt, 2, 2, 0)
    assert p0 == {"kv": [0, 1], "index_k": [0, 1, 2, 3]}
    s, d = prepped_indices([("kv", 2), ("index_k", 1)], {"kv": [0], "index_k": [1]},
                           {"kv": [7], "index_k": [0, 3]}, {"kv": [5], "index_k": [0, 9]}, [0, 10, 20], [0, 8, 16])
    assert s.tolist() == [7, 17, 23] and d.tolist() == [5, 13, 25]


def test_mailbox_records_each_message_as_sent():
    """A message received in the sender's process is recorded with the bytes its send recorded
    (the JSON encoded once, not again at delivery); one received as a copy (another process)
    is encoded there: the same bytes."""
    import pickle

    from kvtrace.tracer.engine.nixlio import Mailbox

    class Rec:
        def __init__(self):
            self.rows = []

        def event(self, kind, agent, request, **kw):
            self.rows.append((kind, agent, request, kw["peer"], kw["msg"], kw["detail"]))

    rec = Rec()
    a, b = Mailbox("prefill", "decode", rec), Mailbox("decode", "prefill", rec)
    b.send("pages", 7, tokens=3, start={"kv": 1}, dst={"kv": [4, 5]})
    b.send("abort", 8, reason="timeout")
    msgs = b.take()
    a.received(msgs[0])
    a.received(pickle.loads(pickle.dumps(msgs[1])))   # a copy: encoded at delivery
    sent, recv = rec.rows[:2], rec.rows[2:]
    assert [r[4] for r in recv] == [r[4] for r in sent]
    assert recv[0][4] == b'{"id":"decode:0","type":"pages","room":7,"tokens":3,"start":{"kv":1},"dst":{"kv":[4,5]}}'
    assert [(r[1], r[2], r[3], r[5]) for r in recv] == [("prefill", "7", "decode", {"id": "decode:0", "type": "pages"}),
                                                        ("prefill", "8", "decode", {"id": "decode:1", "type": "abort"})]
