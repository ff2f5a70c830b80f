"""Scenarios of descriptors against the registered layouts: strides, offsets, bounds and
ownership (layer_offset_mismatch, desc_out_of_bounds, desc_not_owned), with their clean twins
and legal layouts (heterogeneous pools, page-size mismatch, ranks, colocated agents)."""
from __future__ import annotations

from kvtrace.tracer.builder import TraceBuilder

from cases_helpers import case, finish, handshake, pd, push


def _dl_addrs(side, pools, idx_list):
    """Addresses of entries of a list that stacks each pool's layers, each with its own slot count."""
    regions = [(side.pools[n], layer) for n in pools for layer in range(side.pools[n].layers)]
    starts, acc = [], 0
    for pool, _layer in regions:
        starts.append(acc)
        acc += pool.num_slots
    out = []
    for i in idx_list:
        r = max(k for k, s in enumerate(starts) if s <= i)
        pool, layer = regions[r]
        out.append(pool.addr(layer, i - starts[r]))
    return out


@case
def uniform_slot_count(path, bug=True):
    """The uniform-slot-count bug: prepped indices layer * M + page with kv's M for index_k too."""
    return _uniform_slot_count(path, bug, (("kv", 2, 64, 8), ("index_k", 2, 128, 16)))


@case
def uniform_slot_count_shared_count(path, bug=True):
    """uniform_slot_count with a third pool (v) of kv's slot count in the list: the stride
    is both pools' count, and the finding names both (it named one, any_value)."""
    return _uniform_slot_count(path, bug, (("kv", 2, 64, 8), ("v", 2, 64, 8), ("index_k", 2, 128, 16)))


def _uniform_slot_count(path, bug, spec):
    b, p, d = pd(path, pools=spec)
    pools = tuple(n for n, *_ in spec)
    src_dl = p.prep_dlist(pools)
    dst_dl = p.prep_dlist(pools, remote=d)
    src_slots, dst_slots = [1, 2], [3, 5]
    for pool in pools:
        d.alloc("r1", pool, dst_slots)
    d.msg_send(p, "r1/pages", request="r1")
    p.msg_recv(d, "r1/pages", request="r1")
    for pool in pools:
        p.alloc("r1", pool, src_slots)
        p.write("r1", pool, src_slots)
    sidx, didx, nbytes = [], [], []
    for g, (pool, layer) in enumerate([(n, L) for n in pools for L in range(2)]):
        m = 8 if bug else p.pools[pool].num_slots
        starts = {n: sum(q.layers * q.num_slots for q in list(p.pools.values())[:i]) for i, n in enumerate(pools)}
        base = g * 8 if bug else starts[pool] + layer * m
        for s, t in zip(src_slots, dst_slots):
            sidx.append(base + s)
            didx.append(base + t)
            nbytes.append(p.pools[pool].slot_bytes)
    descs = list(zip(_dl_addrs(p, pools, sidx), _dl_addrs(d, pools, didx), nbytes))
    x = p.post("r1", d, descs=descs, msg=b"r1_kv", src_dlist=src_dl, src_idx=sidx, dst_dlist=dst_dl, dst_idx=didx)
    d.notif_recv(p, b"r1_kv", request="r1")
    for pool in pools:
        d.read("r1", pool, dst_slots)
    p.done(x, "r1")
    p.release(x, "r1")
    for pool in pools:
        p.free("r1", pool, src_slots)
        d.free("r1", pool, dst_slots)
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "index_k", [11, 13])] if bug else []


@case
def out_of_bounds(path, bug=True):
    """A descriptor points past the end of the destination's registered memory (sglang #31295)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [4, 5])
    p.write("r1", "kv", [4, 5])
    sp, dp = p.pools["kv"], d.pools["kv"]
    far = dp.addr(1, 7) + 64 * 1000 if bug else dp.addr(0, 3)
    descs = [(sp.addr(0, 4), dp.addr(0, 2), 64), (sp.addr(0, 5), far, 64)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5])
    d.free("r1", "kv", [2, 3])
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", None, [])] if bug else []


@case
def legal_same_slot_numbers(path, bug=False):
    """The same slot numbers in two pools and on two agents, concurrently."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("state", 1, 32, 8)))
    d.alloc("r1", "state", [3])
    handshake(p, d, "r1", [3])
    p.alloc("r1", "kv", [3])
    p.alloc("r1", "state", [3])
    p.write("r1", "kv", [3])
    p.write("r1", "state", [3])
    x1 = p.post("r1", d, src=("kv", [3]), dst=("kv", [3]), msg=b"r1_kv")
    x2 = p.post("r1", d, src=("state", [3]), dst=("state", [3]), msg=b"r1_state")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.notif_recv(p, b"r1_state", request="r1")
    d.read("r1", "kv", [3])
    d.read("r1", "state", [3])
    for x in (x1, x2):
        p.done(x, "r1")
        p.release(x, "r1")
    for side in (p, d):
        side.free("r1", "kv", [3])
        side.free("r1", "state", [3])
    b.close()
    return []


@case
def legal_hybrid_state_pool(path, bug=False):
    """A hybrid (mamba) model: beside the paged kv pool, a state pool with one slot per
    request (different slot numbers on each side, a much larger slot) sent as its own
    transfer with its own notification; decode then updates the state in place, and the
    next request reuses the state slot."""
    b, p, d = pd(path, pools=(("kv", 2, 64, 8), ("mamba", 2, 512, 3)))
    for req, (ps, ds) in (("r1", (0, 2)), ("r2", (1, 2))):
        d.req_start(req)
        d.alloc(req, "kv", [4, 5])
        d.alloc(req, "mamba", [ds])
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
        p.alloc(req, "kv", [1, 2])
        p.alloc(req, "mamba", [ps])
        p.write(req, "kv", [1, 2])
        p.write(req, "mamba", [ps])
        xk = p.post(req, d, src=("kv", [1, 2]), dst=("kv", [4, 5]), msg=f"{req}_kv_0_1_0".encode())
        xs = p.post(req, d, src=("mamba", [ps]), dst=("mamba", [ds]), msg=f"{req}_state_0_0".encode())
        d.notif_recv(p, f"{req}_kv_0_1_0".encode(), request=req)
        d.notif_recv(p, f"{req}_state_0_0".encode(), request=req)
        d.read(req, "kv", [4, 5])
        d.read(req, "mamba", [ds])
        d.write(req, "mamba", [ds], checksums=[0x5EED + ds])     # the decode step updates the state
        d.read(req, "mamba", [ds])
        for x in (xk, xs):
            p.done(x, req)
            p.release(x, req)
        p.free(req, "kv", [1, 2])
        p.free(req, "mamba", [ps])
        d.free(req, "kv", [4, 5])
        d.free(req, "mamba", [ds])
        d.req_done(req)
    b.close()
    return []


def _prepped_multi(path, src_slots, dst_slots, reg_pieces=2, deregister=True, reqs=("r1", "r2", "r3")):
    """Prepped lists made once over kv (8 slots per layer on prefill, 12 on decode) and
    index_k (4 / 6 slots, a larger page: one index_k page per two kv pages), stacked
    region by region; every request indexes them as cumulative_offset(pool) + layer *
    M_pool + page with each side's own M. Memory is registered in several regions per
    pool: kv as one registration spanning all its layers, index_k in ``reg_pieces``
    pieces per layer."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    geo = {p: (("kv", 2, 64, 8), ("index_k", 2, 256, 4)), d: (("kv", 2, 64, 12), ("index_k", 2, 256, 6))}
    for side, pools in geo.items():
        for name, layers, sb, n in pools:
            pool = side.pool(name, layers=layers, slot_bytes=sb, num_slots=n, register=False)
            if name == "kv":
                side.register(pool.addr(0, 0), layers * pool.layer_stride)
            else:
                piece = pool.layer_stride // reg_pieces
                for L in range(layers):
                    for k in range(reg_pieces):
                        side.register(pool.addr(L, 0) + k * piece, piece)
    pools = ("kv", "index_k")
    src_dl = p.prep_dlist(pools)
    dst_dl = p.prep_dlist(pools, remote=d)

    def idx(side, pool, layer, slot):
        off = 0 if pool == "kv" else side.pools["kv"].layers * side.pools["kv"].num_slots
        return off + layer * side.pools[pool].num_slots + slot

    for k, req in enumerate(reqs):
        ks, kd = src_slots[k], dst_slots[k]
        is_, id_ = [ks[0] // 2], [kd[0] // 2]   # one index_k page for the two kv pages
        d.req_start(req)
        d.alloc(req, "kv", kd)
        d.alloc(req, "index_k", id_)
        d.msg_send(p, f"{req}/pages", request=req)
        p.msg_recv(d, f"{req}/pages", request=req)
        p.alloc(req, "kv", ks)
        p.alloc(req, "index_k", is_)
        p.write(req, "kv", ks)
        p.write(req, "index_k", is_)
        sidx, didx, descs = [], [], []
        for pool, ss, ds in (("kv", ks, kd), ("index_k", is_, id_)):
            for L in range(2):
                for s, t in zip(ss, ds):
                    sidx.append(idx(p, pool, L, s))
                    didx.append(idx(d, pool, L, t))
                    descs.append((p.pools[pool].addr(L, s), d.pools[pool].addr(L, t), p.pools[pool].slot_bytes))
        x = p.post(req, d, descs=descs, msg=f"{req}_kv".encode(), src_dlist=src_dl, src_idx=sidx,
                   dst_dlist=dst_dl, dst_idx=didx)
        d.notif_recv(p, f"{req}_kv".encode(), request=req)
        d.read(req, "kv", kd)
        d.read(req, "index_k", id_)
        p.done(x, req)
        p.release(x, req)
        p.free(req, "kv", ks)
        p.free(req, "index_k", is_)
        d.free(req, "kv", kd)
        d.free(req, "index_k", id_)
        d.req_done(req)
    if deregister:
        for side, pools_ in geo.items():
            for name, layers, sb, n in pools_:
                pool = side.pools[name]
                if name == "kv":
                    side.deregister(pool.addr(0, 0), layers * pool.layer_stride)
                else:
                    piece = pool.layer_stride // reg_pieces
                    for L in range(layers):
                        for k in range(reg_pieces):
                            side.deregister(pool.addr(L, 0) + k * piece, piece)
    b.close()
    return p, d


@case
def legal_prepped_reuse_per_pool_counts(path, bug=False):
    """One prepped list pair reused by three requests with different indices; pools with
    different slot counts per pool and per side (layer * M_pool + page, each side's own
    M); several registrations per pool; deregister after every transfer completed.
    Slots up to each side's last (decode kv slot 11 > prefill's 8 slots)."""
    _prepped_multi(path, src_slots=[[0, 1], [6, 7], [2, 3]], dst_slots=[[10, 11], [0, 1], [4, 5]])
    return []


@case
def coalesced_descs(path, bug=True):
    """SGLang's non-prepped path groups contiguous pages into one descriptor per layer
    (length n * item_len): src slots 1-2 → dst slots 5-6 as one 128-byte descriptor —
    legal. The bug: the run is one page too long, into dst slot 7 the request does not hold."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2, 3])
    p.write("r1", "kv", [1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    n = 3 if bug else 2
    descs = [(sp.addr(L, 1), dp.addr(L, 5), n * 64) for L in range(2)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6])      # what the run delivered: checksum_mismatch compares both pages
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2, 3])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("desc_not_owned", "decode", "r1", "kv", [7])] if bug else []



def _descs_into_one_slot(path, descs_of):
    """Slots 1-2 → 5-6 of every layer, with the descriptors descs_of(src pool, dst pool, L)."""
    b, p, d = pd(path)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[e for L in range(2) for e in descs_of(sp, dp, L)], msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [5, 6])
    b.close()


@case
def repeated_descriptor(path, bug=True):
    """One transfer carries the same descriptor twice (slot 1 → slot 5 of layer 0): each copy
    agrees, but the destination bytes are covered twice. The clean twin sends it once."""
    _descs_into_one_slot(path, lambda sp, dp, L: [(sp.addr(L, 1), dp.addr(L, 5), 64), (sp.addr(L, 2), dp.addr(L, 6), 64)]
                         + ([(sp.addr(L, 1), dp.addr(L, 5), 64)] if bug and L == 0 else []))
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5])] if bug else []


@case
def halves_overlap_in_one_slot(path, bug=True):
    """Slot 5 filled by two 32-byte halves — legal, two descriptors in one destination slot
    that do not overlap. The bug starts the second half 8 bytes early: both cover bytes 24-31."""
    k = 8 if bug else 0
    _descs_into_one_slot(path, lambda sp, dp, L: [(sp.addr(L, 1), dp.addr(L, 5), 32),
                                                  (sp.addr(L, 1) + 32 - k, dp.addr(L, 5) + 32 - k, 32),
                                                  (sp.addr(L, 2), dp.addr(L, 6), 64)])
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5])] if bug else []

def _kv_parts(side, layers=2, half=32, num_slots=8):
    """MHA layout (vLLM): one region per layer, K half then V half, each a layout part."""
    base = side._next_base
    for L in range(layers):
        a = base + L * 2 * half * num_slots
        for k, part in enumerate("KV"):
            side.rec.layout(side.name, "kv", L, a + k * half * num_slots, half, num_slots, part=part)
        side.register(a, 2 * half * num_slots)
    side._next_base = base + layers * 2 * half * num_slots + 0x100000
    return lambda L, part, s: base + L * 2 * half * num_slots + "KV".index(part) * half * num_slots + s * half


@case
def kv_parts_swap(path, bug=True):
    """MHA with K and V halves of each layer region described as layout parts: K goes to
    K and V to V — legal. The bug swaps them: the source's K lands in the decode's V."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    pa, da = _kv_parts(p), _kv_parts(d)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [1, 2])
    for L in range(2):
        p.rec.write("prefill", "r1", "kv", L, [1, 2], [100 + L, 200 + L], [0, 1])
    descs = [(pa(L, part, s), da(L, ("V" if part == "K" else "K") if bug else part, t), 32)
             for L in range(2) for part in "KV" for s, t in zip([1, 2], [5, 6])]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    for L in range(2):
        d.rec.read("decode", "r1", "kv", L, [5, 6], [100 + L, 200 + L], [0, 1])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    d.free("r1", "kv", [5, 6])
    b.close()
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5, 6])] if bug else []


@case
def legal_decode_ranks_one_process(path, bug=False):
    """Two decode TP ranks as two agents in one process (one shard), with the same slot
    numbers, each sent the same (replicated MLA) pages by the prefill agent."""
    b = TraceBuilder(path)
    p = b.agent("prefill")
    d0, d1 = b.agent("decode0", shard="decode"), b.agent("decode1", shard="decode")
    for side in (p, d0, d1):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for d in (d0, d1):
        handshake(p, d, "r1", [2, 3])
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    x0 = p.post("r1", d0, src=("kv", [1, 2]), dst=("kv", [2, 3]), msg=b"r1_kv_0")
    x1 = p.post("r1", d1, src=("kv", [1, 2]), dst=("kv", [2, 3]), msg=b"r1_kv_1")
    d0.notif_recv(p, b"r1_kv_0", request="r1")
    d1.notif_recv(p, b"r1_kv_1", request="r1")
    d0.read("r1", "kv", [2, 3])
    d1.read("r1", "kv", [2, 3])
    for x in (x0, x1):
        p.done(x, "r1")
        p.release(x, "r1")
    p.free("r1", "kv", [1, 2])
    for d in (d0, d1):
        d.free("r1", "kv", [2, 3])
    b.close()
    return []


@case
def coalesced_past_region(path, bug=True):
    """kv registered as one NIXL region spanning all its layers (vLLM-style one tensor):
    a grouped run of slots 6-7 of layer 0 is legal; the bug's run starts at slot 7 and
    runs on into layer 1's slot 0 — inside the registration, outside the layer."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        kv = side.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
        side.register(kv.addr(0, 0), 2 * kv.layer_stride)
    first = 7 if bug else 6
    handshake(p, d, "r1", [first, first + 1] if not bug else [7])
    p.alloc("r1", "kv", [6, 7])
    p.write("r1", "kv", [6, 7])
    sp, dp = p.pools["kv"], d.pools["kv"]
    x = p.post("r1", d, descs=[(sp.addr(0, 6), dp.addr(0, first), 128)], msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [6, 7])
    d.free("r1", "kv", [first, first + 1] if not bug else [7])
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "kv", [7])] if bug else []


@case
def coalesced_past_region_two_pools(path, bug=True):
    """coalesced_past_region in two pools at once (kv and aux, each registered as one
    region spanning its layers): each bad run is reported under its own pool (the check
    grouped by request and named min(pool): kv's run from slot 7 was 'pool aux')."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        for name, n in (("kv", 8), ("aux", 4)):
            pool = side.pool(name, layers=2, slot_bytes=64, num_slots=n, register=False)
            side.register(pool.addr(0, 0), 2 * pool.layer_stride)
    first = {"kv": 7 if bug else 6, "aux": 3 if bug else 2}
    held = {k: [v] if bug else [v, v + 1] for k, v in first.items()}
    handshake(p, d, "r1", held["kv"])
    d.alloc("r1", "aux", held["aux"])
    src = {"kv": [6, 7], "aux": [2, 3]}
    for name in ("kv", "aux"):
        p.alloc("r1", name, src[name])
        p.write("r1", name, src[name])
    descs = [(p.pools[n].addr(0, src[n][0]), d.pools[n].addr(0, first[n]), 128) for n in ("kv", "aux")]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    for name in ("kv", "aux"):
        p.free("r1", name, src[name])
        d.free("r1", name, held[name])
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "kv", [7]),
            ("desc_out_of_bounds", "decode", "r1", "aux", [3])] if bug else []


@case
def past_region_and_cross_slot(path, bug=True):
    """One transfer with two bad destination ends in decode's kv (one region spanning both
    layers): one runs from slot 7 past layer 0's end, the other starts at slot 2 and ends
    mid-slot 3 (its source, 96 bytes from slot 4, crosses too). Two findings on decode, each
    described by its own message (they were one, all
    '2 dst descriptor end(s) ... run past the end of ... layer 0')."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        kv = side.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
        side.register(kv.addr(0, 0), 2 * kv.layer_stride)
    held = [2, 3, 7] if bug else [2, 3, 6, 7]
    handshake(p, d, "r1", held)
    p.alloc("r1", "kv", [4, 5, 6, 7])
    p.write("r1", "kv", [4, 5, 6, 7])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(0, 6), dp.addr(0, 7 if bug else 6), 128), (sp.addr(0, 4), dp.addr(0, 2), 96 if bug else 128)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [4, 5, 6, 7])
    d.free("r1", "kv", held)
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "kv", [7]),
            ("desc_out_of_bounds", "decode", "r1", "kv", [2]),
            ("desc_out_of_bounds", "prefill", "r1", "kv", [4])] if bug else []


@case
def legal_colocated_one_shard(path, bug=False):
    """Prefill and decode agents in one process (one shard, e.g. a single-node test rig):
    the same slot numbers on both, every edge inside the shard."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill", shard="both"), b.agent("decode", shard="both")
    for side in (p, d):
        side.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    for req in ("r1", "r2"):
        handshake(p, d, req, [2, 3])
        x = push(p, d, req, [2, 3], [2, 3])
        finish(p, d, req, x, [2, 3], [2, 3])
    b.close()
    return []


@case
def legal_page_size_mismatch(path, bug=False):
    """Decode pages hold two prefill pages (32 vs 16 tokens): prefill page 2k goes to the
    first half of decode page k, page 2k+1 to the second half (sub-slot offsets)."""
    return _page_size_mismatch(path, bug)


@case
def page_size_mismatch_wrong_half(path, bug=True):
    """Decode pages of two prefill pages; the bug puts every odd prefill page into the
    first half of its decode page, over the even one, leaving the second half unwritten."""
    _page_size_mismatch(path, bug)
    return [("layer_offset_mismatch", "decode", "r1", "kv", [5, 6])] if bug else []


def _page_size_mismatch(path, bug):
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    p.pool("kv", layers=2, slot_bytes=32, num_slots=8, page_tokens=16)
    d.pool("kv", layers=2, slot_bytes=64, num_slots=8, page_tokens=32)
    handshake(p, d, "r1", [5, 6])
    p.alloc("r1", "kv", [0, 1, 2, 3])
    p.write("r1", "kv", [0, 1, 2, 3])
    sp, dp = p.pools["kv"], d.pools["kv"]
    descs = [(sp.addr(L, s), dp.addr(L, [5, 6][s // 2]) + (0 if bug else 32 * (s % 2)), 32)
             for L in range(2) for s in range(4)]
    x = p.post("r1", d, descs=descs, msg=b"r1_kv")
    d.notif_recv(p, b"r1_kv", request="r1")
    d.read("r1", "kv", [5, 6], checksums=[1, 2])
    p.done(x, "r1")
    p.release(x, "r1")
    p.free("r1", "kv", [0, 1, 2, 3])
    d.free("r1", "kv", [5, 6])
    b.close()
    return []


@case
def legal_split_scheduler_worker(path, bug=False):
    """vLLM's process split on decode: the scheduler process allocates and frees blocks
    (its hooks name the worker's agent), the GPU worker process owns the NIXL agent, posts
    the READ and reads; scheduler → worker → scheduler hand-offs are control messages."""
    b = TraceBuilder(path)
    p = b.agent("prefill")
    p.pool("kv", layers=2, slot_bytes=64, num_slots=8)
    sched = b.agent("decode", shard="decode-sched")
    sched.pool("kv", layers=2, slot_bytes=64, num_slots=8, register=False)
    w = b.agent("decode", shard="decode-worker")
    w.pool("kv", layers=2, slot_bytes=64, num_slots=8, base=sched.pools["kv"].base)
    sched.req_start("r1")
    sched.alloc("r1", "kv", [6, 7])
    sched.msg_send(w, "r1/sched", request="r1")
    w.msg_recv(sched, "r1/sched", request="r1")
    w.pages.update(sched.pages)
    p.alloc("r1", "kv", [1, 2])
    p.write("r1", "kv", [1, 2])
    p.msg_send(w, "r1/ready", request="r1")
    w.msg_recv(p, "r1/ready", request="r1")
    x = w.post("r1", p, op="READ", src=("kv", [1, 2]), dst=("kv", [6, 7]))
    w.done(x, "r1")
    w.read("r1", "kv", [6, 7])
    w.release(x, "r1")
    w.notif_send(p, b"r1:1", request="r1")
    p.notif_recv(w, b"r1:1", request="r1")
    p.free("r1", "kv", [1, 2])
    w.msg_send(sched, "r1/finished", request="r1")
    sched.msg_recv(w, "r1/finished", request="r1")
    sched.free("r1", "kv", [6, 7])
    b.close()
    return []


@case
def use_after_deregister(path, bug=True):
    """Decode tears down one registration piece of its index_k memory and tells prefill
    (a control message); prefill then posts into it anyway. The clean twin deregisters
    only after the transfer completed."""
    b = TraceBuilder(path)
    p, d = b.agent("prefill"), b.agent("decode")
    for side in (p, d):
        ik = side.pool("index_k", layers=1, slot_bytes=256, num_slots=4, register=False)
        side.register(ik.addr(0, 0), 2 * 256)
        side.register(ik.addr(0, 2), 2 * 256)
    ik = d.pools["index_k"]
    handshake(p, d, "r1", [3], pool="index_k")
    if bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
        d.msg_send(p, "teardown", request="r1")
        p.msg_recv(d, "teardown", request="r1")
    x = push(p, d, "r1", [1], [3], pool="index_k")
    finish(p, d, "r1", x, [1], [3], pool="index_k")
    if not bug:
        d.deregister(ik.addr(0, 2), 2 * 256)
    b.close()
    return [("desc_out_of_bounds", "decode", "r1", "index_k", [3])] if bug else []
