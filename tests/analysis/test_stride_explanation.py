"""layer_offset_mismatch names the wrong slot count behind misaddressed prepped indices:
also when a slot number is at or past that count (its index then lands in a later
region), and when the two sides' lists have different slot counts. Indices that no single
slot count explains get no explanation."""
from kvtrace.analysis.session import TraceSession
from kvtrace.tracer.builder import TraceBuilder

POOLS = ("kv", "index_k")


def _addrs(side, idx_list):
    """Entry addresses of a list stacking every layer of kv then index_k, each region
    with its own pool's slot count."""
    regions = [(side.pools[n], layer) for n in POOLS for layer in range(side.pools[n].layers)]
    starts = [sum(r[0].num_slots for r in regions[:k]) for k in range(len(regions))]
    out = []
    for i in idx_list:
        r = max(k for k, s in enumerate(starts) if s <= i)
        out.append(regions[r][0].addr(regions[r][1], i - starts[r]))
    return out


def _scenario(path, index_of):
    """One request, kv and index_k pages on both sides; prefill has smaller pools than
    decode. ``index_of(side_counts, region, slot)`` is the engine's index formula."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    counts = {"prefill": {"kv": 6, "index_k": 12}, "decode": {"kv": 8, "index_k": 16}}
    for side in (p, d):
        for name in POOLS:
            side.pool(name, layers=2, slot_bytes=64 if name == "kv" else 128, num_slots=counts[side.name][name])
    src_dl, dst_dl = p.prep_dlist(POOLS), p.prep_dlist(POOLS, remote=d)
    src_slots, dst_slots = [1, 7], [3, 12]      # 7 >= prefill kv's 6, 12 >= decode kv's 8
    for pool in POOLS:
        d.alloc("r1", pool, dst_slots if pool == "index_k" else [3, 5])
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    for pool in POOLS:
        p.alloc("r1", pool, src_slots if pool == "index_k" else [1, 2])
        p.write("r1", pool, src_slots if pool == "index_k" else [1, 2])
    sidx, didx, nbytes = [], [], []
    for g, (pool, _layer) in enumerate([(n, L) for n in POOLS for L in range(2)]):
        ss, ds = (src_slots, dst_slots) if pool == "index_k" else ([1, 2], [3, 5])
        for s, t in zip(ss, ds):
            sidx.append(index_of(counts["prefill"], g, s))
            didx.append(index_of(counts["decode"], g, t))
            nbytes.append(p.pools[pool].slot_bytes)
    descs = list(zip(_addrs(p, sidx), _addrs(d, didx), nbytes))
    x = p.post("r1", d, descs=descs, msg=b"r1_kv", src_dlist=src_dl, src_idx=sidx, dst_dlist=dst_dl, dst_idx=didx)
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    b.close()
    return [f for f in TraceSession(path).findings() if f.check == "layer_offset_mismatch"]


def _uniform(counts, region, slot):
    return region * counts["kv"] + slot          # the bug: kv's count for every region


def _correct(counts, region, slot):
    return (region if region < 2 else 2) * counts["kv"] + max(0, region - 2) * counts["index_k"] + slot


def test_overflowing_slots_still_name_the_stride(tmp_path):
    found = _scenario(str(tmp_path / "usc.kvtrace"), _uniform)
    assert [(f.request, f.pool) for f in found] == [("r1", "index_k")]
    f = found[0]
    assert (f.extra["stride"], f.extra["stride_pool"], f.extra["pool_slots"]) == (8, "kv", 16)
    assert "slot count (M=8) applied to pool index_k (M=16)" in f.message


def test_correct_indices_give_no_finding(tmp_path):
    assert _scenario(str(tmp_path / "ok.kvtrace"), _correct) == []


def test_indices_no_single_count_explains_get_no_stride(tmp_path):
    # destination indices shifted by one slot past the correct ones: stray, but no
    # layer * M + slot formula with one M gives them on both sides
    found = _scenario(str(tmp_path / "shift.kvtrace"),
                      lambda c, g, s: _correct(c, g, s) + (1 if g >= 2 and c["kv"] == 8 else 0))
    assert found and all(f.extra["stride"] is None for f in found)
