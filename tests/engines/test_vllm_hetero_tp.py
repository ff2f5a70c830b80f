"""Heterogeneous tensor parallelism (prefill TP != decode TP) with vLLM 0.34's own NIXL
connector, unmodified, recorded with only ``--hooks vllm``: ``vllm_pd.py --prefill-tp N
--decode-tp M`` runs every TP rank as a process of its own with its own NIXL agent (vLLM's
``external_launcher`` shape) and vLLM's handshake and TP mapping decide who reads what.

Decode TP > prefill TP: each decode rank READs its KV heads, a slice at an offset inside
every prefill block, and prefill frees a request's blocks only after every reader's
notification. Prefill TP > decode TP: a decode rank READs from several prefill ranks into
slices of its own blocks. The driver stamps every head slice; its verifier says which decode
head slices hold whose bytes, vLLM's stats say how many READs, descriptors and bytes it moved.
"""
from __future__ import annotations

import os
import sys

import pytest

from engine_runs import check, driver, findings, need_engines, record
from vllm_facts import as_registered, info, layouts, prefill_report, slot_spans

VLLM = driver("vllm_pd.py")
LATE_READ = ["--lease", "2", "--decode-delay", "6"]
SHAPES = pytest.mark.parametrize("ptp,dtp", [(1, 2), (2, 1)], ids=["decode-tp-2-of-1", "prefill-tp-2-into-1"])


def tp(ptp: int, dtp: int) -> list[str]:
    return ["--prefill-tp", str(ptp), "--decode-tp", str(dtp)]


@pytest.mark.slow
@pytest.mark.parametrize("ptp,dtp,extra", [
    (1, 2, []), (2, 1, []),
    (2, 1, ["--kv-layout", "split"]),   # K blocks then V blocks: each piece split by heads
    (1, 2, ["--kv-layout", "mla"]),     # one latent per token, replicated on every rank: read whole
    (2, 1, ["--kv-layout", "mla"]),     # ...read from one prefill rank; the other is only notified
    (1, 2, ["--heads", "1"]),           # more decode ranks than KV heads: the head is replicated
], ids=["decode-tp-2-of-1", "prefill-tp-2-into-1", "split-kv-prefill-tp-2-into-1", "mla-decode-tp-2-of-1",
        "mla-prefill-tp-2-into-1", "replicated-head-decode-tp-2-of-1"])
def test_vllm_hetero_tp_clean_checks_clean_and_trace_holds_every_post(tmp_path, ptp, dtp, extra):
    need_engines()
    assert_clean_hetero(record(tmp_path, VLLM, tp(ptp, dtp) + extra, hooks="vllm"), ptp, dtp)


def assert_clean_hetero(run, ptp: int, dtp: int) -> None:
    """A clean hetero-TP run: no finding and nothing unknown; every rank's regions, every
    READ, descriptor and byte vLLM counted is in the trace, and every descriptor is the head
    slice vLLM's TP mapping says."""
    assert run.rc == 0, run.stderr[-3000:]
    rep, pre = run.report, prefill_report(run)
    assert len(rep["ranks"]) == dtp and len(pre["ranks"]) == ptp
    assert len(rep["requests"]) == 3 and rep["misaddressed"] == []
    res = check(run.trace)
    assert findings(res) == [], [f["message"] for f in findings(res)][:3]
    assert res["notes"] == [], res["notes"]
    # head slices: a decode slot's checksum is never a prefill slot's, so checksum_mismatch can
    # compare nothing and says so (skipped, with why) rather than "holds"; whole copies: compared
    # decode's own KV writes are not recorded: owner_overwrites_delivered examines nothing and
    # says so (skipped, with why)
    states = dict(res["verdict"]["checks"])
    sliced = not replicated(rep, ptp)
    assert states.pop("checksum_mismatch") == ("skipped" if sliced else "holds"), res["skipped"]
    assert states.pop("owner_overwrites_delivered") == "skipped", res["skipped"]
    assert set(states.values()) == {"holds"}, res["verdict"]["checks"]
    why = {s["check"]: s["why"] for s in res["skipped"]}
    assert sorted(why) == sorted(["owner_overwrites_delivered"] + (["checksum_mismatch"] if sliced else []))
    if sliced:
        assert "head slice" in why["checksum_mismatch"], res["skipped"]
    got = info(run.trace)
    # one agent per rank, each with the regions it registered (its share of the heads)
    lay = layouts(run.trace)
    pagents, dagents = [r["agent"] for r in pre["ranks"]], [r["agent"] for r in rep["ranks"]]
    assert len(set(pagents + dagents)) == ptp + dtp and set(lay) == set(pagents + dagents)
    for side in pre["ranks"] + rep["ranks"]:
        assert as_registered(lay[side["agent"]]) == sorted(side["regions"], key=lambda r: r["addr"])
    layers = len(rep["ranks"][0]["regions"])    # regions per rank: a layer's, or its K and V pieces
    blocks = sum(len(r["blocks"]) for r in rep["requests"])
    # READs per request: one per decode rank, or one per prefill rank when prefill's ranks each
    # hold a share of a decode rank's heads
    per_req = ptp if ptp > dtp and not replicated(rep, ptp) else dtp
    reads = per_req * len(rep["requests"])
    assert got["transfers"] == rep["transfers"] == reads
    # a descriptor per (block, region) of each READ
    assert got["descriptors"] == rep["descriptors"] == per_req * blocks * layers
    # every decode rank's blocks are filled whole, once
    decode_block_bytes = sum(r["block_len"] for side in rep["ranks"] for r in side["regions"])
    assert got["bytes"] == rep["vllm_stats"]["bytes_transferred"] == blocks * decode_block_bytes
    # each READ notifies the prefill rank it read (a replicated cache read from one prefill rank
    # of several: vLLM notifies the others without reading); every rank wrote, read and freed its own share
    assert got["kinds"]["notif_recv"] == max(reads, ptp * len(rep["requests"]))
    assert pre["read_by_all"] == ptp * len(rep["requests"])   # no lease expired: every rank's every request
    n = len(rep["requests"])
    assert got["kinds"]["write"] == ptp * n * layers and got["kinds"]["read"] == dtp * n * layers
    pools = len({r["pool"] for rows in lay.values() for r in rows})   # kv, or kv.K and kv.V
    assert got["kinds"]["alloc"] == got["kinds"]["free"] == (ptp + dtp) * n * pools
    # kv_transfer_params: one per prefill rank into decode rank 0, handed on to decode's other ranks
    assert got["kinds"]["msg_send"] == got["kinds"]["msg_recv"] == n * (ptp + dtp - 1)
    assert_head_slices(run, ptp, dtp)
    assert_freed_after_every_reader(run, pagents)


def assert_freed_after_every_reader(run, pagents: list[str]) -> None:
    """Each prefill rank frees a request's blocks only after the notifications of all the
    decode ranks that read it (the count each notification carries, ``"{request}:{readers}"``)."""
    from kvtrace.tracer import open_trace
    ev = open_trace(run.trace).table("events").to_pylist()
    for agent in pagents:
        mine = [e for e in ev if e["agent"] == agent]
        for r in run.report["requests"]:
            notes = [(e["seq"], bytes(e["msg"]).decode()) for e in mine if e["kind"] == "notif_recv"
                     and bytes(e["msg"]).decode().rsplit(":", 1)[0] == r["id"]]
            frees = [e["seq"] for e in mine if e["kind"] == "free" and e["request"] == r["id"]]
            assert notes and frees, (agent, r["id"])
            readers = {int(m.rsplit(":", 1)[1]) for _seq, m in notes}
            assert readers == {len(notes)} and min(frees) > max(seq for seq, _m in notes), (agent, r["id"], notes)


def replicated(rep, ptp: int) -> bool:
    """The KV is not split by heads between the engines: MLA's latent, or more ranks than heads."""
    return rep["use_mla"] or max(ptp, len(rep["ranks"])) > rep["heads"]


def assert_head_slices(run, ptp: int, dtp: int) -> None:
    """Every descriptor copies page g of a region from the prefill block to the decode block
    of that page, between the ranks vLLM pairs, at the offsets of the heads they share: decode
    rank d of a larger decode TP reads slice d % ratio of prefill rank d // ratio's block (the
    whole block when the KV is replicated); a decode rank of a smaller TP receives prefill rank
    p's whole block in slice p % ratio."""
    rep, pre = run.report, prefill_report(run)
    rank_of = {r["agent"]: i for i, r in enumerate(pre["ranks"])}
    rank_of.update({r["agent"]: i for i, r in enumerate(rep["ranks"])})
    pairs = {(src, dst) for r in rep["requests"] for src, dst in zip(r["remote_blocks"], r["blocks"])}
    spans = slot_spans(run.trace)
    assert spans and all(s["src"] and s["dst"] for s in spans), [s for s in spans if not (s["src"] and s["dst"])][:3]
    for s in spans:
        src, dst = s["src"], s["dst"]
        assert (src["pool"], src["layer"]) == (dst["pool"], dst["layer"]) and (src["slot"], dst["slot"]) in pairs, s
        p, d = rank_of[src["agent"]], rank_of[dst["agent"]]
        if replicated(rep, ptp):   # whole blocks, from the prefill rank vLLM picks for the decode rank
            assert p == d * ptp // dtp and s["nbytes"] == dst["slot_bytes"] == src["slot_bytes"], s
            assert (src["off"], dst["off"]) == (0, 0), s
        elif dtp >= ptp:
            ratio = dtp // ptp
            assert p == d // ratio and s["nbytes"] == dst["slot_bytes"] == src["slot_bytes"] // ratio, s
            assert (src["off"], dst["off"]) == ((d % ratio) * dst["slot_bytes"], 0), s
        else:
            ratio = ptp // dtp
            assert d == p // ratio and s["nbytes"] == src["slot_bytes"] == dst["slot_bytes"] // ratio, s
            assert (src["off"], dst["off"]) == (0, (p % ratio) * src["slot_bytes"]), s


@pytest.mark.slow
@SHAPES
def test_vllm_hetero_tp_expired_lease_late_read_found_and_verifier_agrees(tmp_path, ptp, dtp):
    """vllm #52234's shape under hetero TP: prefill's lease runs out, its ranks free and reuse
    the blocks, decode's ranks read later and get another request's head slices. Every head
    slice the verifier caught is explained by a finding on the prefill rank that holds that
    head, naming the request and the prefill block it freed early."""
    need_engines()
    run = record(tmp_path, VLLM, tp(ptp, dtp) + LATE_READ, hooks="vllm")
    assert run.rc == 0, run.stderr[-3000:]
    rep, pre = run.report, prefill_report(run)
    bad = rep["misaddressed"]
    assert bad, "decode should read blocks prefill had already reused"
    assert {m["rank"] for m in bad} == set(range(dtp))  # every decode rank read stale slices
    res = check(run.trace)
    assert {f["check"] for f in findings(res)} == {"src_free_before_done"}, [f["message"] for f in findings(res)][:3]
    named = {(f["request"], f["agent"]): set(f["slots"]) for f in findings(res, "src_free_before_done")}
    remote = {r["id"]: r["remote_blocks"] for r in rep["requests"]}
    heads_per_prefill_rank = rep["heads"] // ptp
    for m in bad:
        holder = pre["ranks"][m["head"] // heads_per_prefill_rank]["agent"]  # the prefill rank with that head
        assert remote[m["request"]][m["page"]] in named.get((m["request"], holder), set()), (m, named)
    assert {r for r, _agent in named} >= {m["request"] for m in bad}


# ----------------------------------------------------------------- pure helpers (fast)
def _driver():
    sys.path.insert(0, os.path.dirname(VLLM))
    import vllm_pd
    return vllm_pd


def _args(*argv: str):
    pd = _driver()
    a = pd.parser().parse_args(list(argv))
    a.heads = a.heads if a.heads is not None else max(a.prefill_tp, a.decode_tp)
    return pd, a


def test_head_slices_tile_each_block_with_the_ranks_global_heads():
    """A rank's head slices cover each block once, in order, and carry the model's head
    numbers of that rank's share (rank 1 of 2 over 4 heads holds heads 2 and 3)."""
    pd, a = _args("--heads", "4", "--decode-tp", "2")
    a.rank, a.rank_heads, a.first_head = 1, 2, 2
    page = 2 * 2 * a.block_size * a.head_size * 4
    got = pd.head_slices(a, page, 5)
    assert got == [(5 * page, page // 2, 0, 2), (5 * page + page // 2, page // 2, 0, 3)]
    a.kv_layout = "split"   # K blocks, then V blocks: each piece split by heads
    got = pd.head_slices(a, page, 0)
    half = page // 2
    assert [(o, n, part, h) for o, n, part, h in got] == [
        (0, half // 2, 0, 2), (half // 2, half // 2, 0, 3),
        (a.blocks * half, half // 2, 1, 2), (a.blocks * half + half // 2, half // 2, 1, 3)]


def test_tp_refusals_say_why_in_one_line():
    cases = {("--prefill-tp", "2", "--decode-tp", "3", "--heads", "6"): "divide",
             ("--prefill-tp", "2", "--decode-tp", "1", "--heads", "1"): "_validate_remote_agent_handshake",
             ("--decode-tp", "2", "--heads", "3"): "KV heads",
             ("--decode-tp", "2", "--memory", "vram"): "DRAM",
             ("--decode-tp", "2", "--role", "one-process"): "process of its own"}
    for argv, says in cases.items():
        pd, a = _args(*argv)
        why = pd.tp_refusal(a)
        assert why and says in why and "\n" not in why, (argv, why)
    for argv in (("--decode-tp", "2"), ("--prefill-tp", "2"), ("--prefill-tp", "1", "--decode-tp", "4", "--heads", "2")):
        pd, a = _args(*argv)
        assert pd.tp_refusal(a) is None, argv


def test_params_message_ids_pair_one_sender_with_one_receiver():
    """The kv_transfer_params message under TP: every id the hooks record is sent once and
    received once, whatever the two TP sizes, and decode rank 0 receives one per prefill rank
    (so each prefill rank's blocks are ordered before every decode rank's READs)."""
    from tracer.integrations import vllm as hooks

    class Remote:
        block_ids = [[3, 1]]

    class Events:  # kvtrace's recorder interface: the rows the hooks would write
        def __init__(self):
            self.rows = []

        def event(self, kind, agent, request, **kw):
            self.rows.append((str(kind), agent, kw["detail"]["id"]))

    for ptp, dtp in ((1, 1), (1, 2), (2, 1), (2, 4), (4, 2)):
        rec = Events()
        for p in range(ptp):
            rec.event("msg_send", f"P{p}", "r", detail={"id": hooks._params_id("r", p, ptp)})
        for d in range(dtp):
            st = hooks._State.__new__(hooks._State)
            st.agent, st.tp_rank, st.tp_size = f"D{d}", d, dtp
            hooks._params_received(st, rec, "r", Remote(), ptp)
        sent = sorted(i for k, _a, i in rec.rows if k == "msg_send")
        recv = sorted(i for k, _a, i in rec.rows if k == "msg_recv")
        assert sent == recv and len(set(sent)) == len(sent) == ptp + dtp - 1, (ptp, dtp, rec.rows)
        assert sum(1 for k, a, _i in rec.rows if k == "msg_recv" and a == "D0") == ptp
        if ptp == dtp == 1:
            assert sent == ["blocks:r"]   # the id of runs without TP is unchanged
